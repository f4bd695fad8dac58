// starplan review page. Every value that comes from the server is put into the page as text
// (textContent, text nodes, attribute values): never as markup. No inline script, nothing from
// elsewhere: the Content-Security-Policy forbids both.
'use strict';

(function () {
  const PAGE_HEADER = 'X-Starplan-Page';
  // The session's key: the login's answer carries it, and the server takes the session cookie
  // only with it, so a process that replays the cookie (cookies are scoped by host, not port)
  // authorizes nothing. It is kept in this tab's sessionStorage, which is scoped by origin, port
  // included, so a page of another port cannot read it, and a reload of this tab keeps it; no
  // endpoint hands it out again.
  const KEY_HEADER = 'X-Starplan-Session-Key';
  const KEY_PARAM = 'session_key';
  const KEY_ITEM = 'starplan.session_key';
  const FILTERS = ['pending', 'applied', 'rejected', 'failed', 'all'];

  const $ = (id) => document.getElementById(id);
  const state = { view: null, filter: 'pending', runId: null, review: null, events: null, refreshing: false };

  function sessionKey() {
    try { return sessionStorage.getItem(KEY_ITEM) || ''; } catch (e) { return ''; }
  }

  function keepKey(key) {
    try {
      if (key) sessionStorage.setItem(KEY_ITEM, key);
      else sessionStorage.removeItem(KEY_ITEM);
    } catch (e) { /* storage off: the session lasts until a reload */ }
    state.key = key || '';
  }

  // safe writes the characters a plan or a proposer may use to hide or reorder text (controls,
  // bidi overrides and isolates, zero-width and other format characters, line separators) as
  // visible escapes (\u202e, \x1b), as the terminal and the diff's cells show them
  // (internal/termsafe). lines keeps line breaks and tabs (printed output, the answer).
  const UNSAFE = /[\p{Cc}\p{Cf}\u2028\u2029]/gu;
  function safe(s, lines) {
    return String(s).replace(UNSAFE, (c) => {
      if (lines && (c === '\n' || c === '\t')) return c;
      if (c === '\n') return '\\n';
      if (c === '\t') return '\\t';
      if (c === '\r') return '\\r';
      const n = c.codePointAt(0);
      if (n < 0x100) return '\\x' + n.toString(16).padStart(2, '0');
      if (n <= 0xffff) return '\\u' + n.toString(16).padStart(4, '0');
      return '\\U' + n.toString(16).padStart(8, '0');
    });
  }

  // el builds an element: attrs are properties or attributes, children are nodes or strings
  // (strings become text nodes).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat(Infinity)) {
      if (c === undefined || c === null || c === false) continue;
      e.append(typeof c === 'string' ? document.createTextNode(c) : c);
    }
    return e;
  }

  function show(section) {
    for (const id of ['login', 'queue', 'run']) $(id).hidden = id !== section;
    state.view = section;
  }

  function problem(node, text) {
    node.textContent = text || '';
    node.hidden = !text;
  }

  // api calls the server with the session cookie and its key; changing calls carry the page's
  // CSRF header.
  async function api(method, path, body) {
    const opts = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
    if (method !== 'GET') opts.headers[PAGE_HEADER] = '1';
    if (state.key) opts.headers[KEY_HEADER] = state.key;
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    const res = await fetch(path, opts);
    let data = null;
    const text = await res.text();
    if (text) {
      try { data = JSON.parse(text); } catch (e) { data = null; }
    }
    if (res.status === 401 && path !== '/login') {
      needLogin();
    }
    return { status: res.status, data };
  }

  // sentence ends a message with a full stop unless it has one, then adds the hint.
  function sentence(message, hint) {
    let s = message || '';
    if (s && !/[.!?]$/.test(s)) s += '.';
    return s + (hint ? ' Try: ' + hint + '.' : '');
  }

  function errorText(r) {
    const e = r.data && r.data.error;
    if (!e) return 'The server answered ' + r.status + '.';
    return sentence(e.message, e.hint);
  }

  // ---- time

  function age(iso) {
    const t = Date.parse(iso);
    if (!t) return '';
    const s = Math.max(0, Math.round((Date.now() - t) / 1000));
    if (s < 60) return s + ' s ago';
    if (s < 3600) return Math.floor(s / 60) + ' min ago';
    if (s < 86400) return Math.floor(s / 3600) + ' h ago';
    return Math.floor(s / 86400) + ' d ago';
  }

  function timeEl(iso) {
    if (!iso) return el('span', { text: '—' });
    return el('time', { datetime: iso, title: new Date(iso).toLocaleString(), 'data-age': '1' }, age(iso));
  }

  function tickAges() {
    for (const t of document.querySelectorAll('time[data-age]')) t.textContent = age(t.getAttribute('datetime'));
  }

  // ---- login

  function needLogin(note) {
    stopEvents();
    keepKey('');
    $('logout-form').hidden = true;
    $('live').textContent = 'Signed out';
    show('login');
    problem($('login-note'), note || '');
    $('token').focus();
  }

  async function login(ev) {
    ev.preventDefault();
    const token = $('token').value.trim();
    const r = await api('POST', '/login', { token });
    $('token').value = '';
    if (r.status !== 200 || !r.data || !r.data.session_key) {
      problem($('login-note'), errorText(r));
      $('token').focus();
      return;
    }
    keepKey(r.data.session_key);
    problem($('login-note'), '');
    started();
  }

  // loginWithCode trades a one-time link's code for a session; the link put the code in the
  // fragment, which is taken off the address at once.
  async function loginWithCode(code) {
    history.replaceState(null, '', '#/queue/pending');
    const r = await api('POST', '/login', { code });
    if (r.status !== 200 || !r.data || !r.data.session_key) {
      return needLogin('That login link was used already or has expired. Sign in with the token, or start starplan serve again for a new link.');
    }
    keepKey(r.data.session_key);
    problem($('login-note'), '');
    return started();
  }

  async function logout(ev) {
    ev.preventDefault();
    await api('POST', '/logout');
    needLogin('Signed out.');
  }

  // ---- routing: #/queue/<filter>, #/runs/<id>

  function route() {
    const h = location.hash.replace(/^#\/?/, '');
    const parts = h.split('/');
    if (parts[0] === 'login' && parts[1] === 'code' && parts[2]) return loginWithCode(decodeURIComponent(parts[2]));
    if (parts[0] === 'login' && parts[1] === 'expired') {
      history.replaceState(null, '', '#/queue/pending');
      return needLogin('That login link was used already or has expired. Sign in with the token, or start starplan serve again for a new link.');
    }
    if (parts[0] === 'runs' && parts[1]) return openRun(decodeURIComponent(parts.slice(1).join('/')), true);
    const f = FILTERS.includes(parts[1]) ? parts[1] : 'pending';
    return openQueue(f, true);
  }

  // ---- the queue

  // nav counts navigations and shown is the last one on screen. An answer that arrives after a
  // later navigation is dropped; a refresh (refresh set) redraws only the view on screen, and
  // only while no navigation is under way, so it never takes the reader elsewhere.
  let nav = 0;
  let shown = 0;
  const settled = (view, id) => nav === shown && state.view === view && (id === undefined || state.runId === id);

  async function openQueue(filter, focus, refresh) {
    if (refresh && !settled('queue')) return;
    const seq = refresh ? nav : ++nav;
    const r = await api('GET', '/review/queue?filter=' + encodeURIComponent(filter));
    if (seq !== nav || (refresh && !settled('queue')) || r.status === 401) return;
    shown = seq;
    state.filter = filter;
    state.runId = null;
    state.review = null;
    $('back').setAttribute('href', '#/queue/' + filter);
    for (const a of document.querySelectorAll('.filters a')) {
      if (a.dataset.filter === filter) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    show('queue');
    document.title = 'Runs: ' + filter + ' — starplan review';
    if (r.status !== 200) {
      problem($('queue-problem'), errorText(r));
      return;
    }
    problem($('queue-problem'), '');
    renderQueue(r.data.runs || []);
    if (focus) $('queue-h').focus();
  }

  // renderQueue updates the list in place: an item that did not change keeps its node (and the
  // focus, if it has it), so a live update does not pull the list from under the reader.
  function renderQueue(runs) {
    const list = $('queue-list');
    const old = new Map([...list.children].map((li) => [li.dataset.run, li]));
    const want = runs.map((run) => {
      const sig = JSON.stringify([run.request, run.proposer, run.subject, run.outcome, run.status, run.state, run.summary, run.headline, run.time]);
      const li = old.get(run.id);
      if (li && li.dataset.sig === sig) return li;
      const fresh = queueItem(run);
      fresh.dataset.sig = sig;
      return fresh;
    });
    const keep = new Set(want);
    for (const li of [...list.children]) if (!keep.has(li)) li.remove();
    want.forEach((li, i) => {
      if (list.children[i] !== li) list.insertBefore(li, list.children[i] || null);
    });
    $('queue-empty').hidden = runs.length > 0;
  }

  function queueItem(run) {
    return el('li', { 'data-run': run.id, class: 'run-' + run.state },
      el('h2', {}, el('a', { href: '#/runs/' + encodeURIComponent(run.id) }, run.request ? safe(run.request) : '(no request given)')),
      el('p', { class: 'meta' },
        el('span', { class: 'badge ' + run.state }, run.state),
        el('span', {}, 'by ', run.proposer),
        run.subject ? el('span', { class: 'subject' }, 'on behalf of ', el('strong', {}, safe(run.subject))) : null,
        el('span', {}, 'outcome ', run.outcome + (run.status ? ' · STATUS ' + run.status : '')),
        timeEl(run.time),
        el('span', { class: 'mono' }, run.id)),
      run.summary ? el('p', { class: 'summary' }, run.summary) : null,
      run.headline ? el('p', { class: 'headline' }, run.headline) : null);
  }

  // ---- one run

  async function openRun(id, focus, refresh) {
    if (refresh && !settled('run', id)) return;
    const seq = refresh ? nav : ++nav;
    const r = await api('GET', '/review/runs/' + encodeURIComponent(id));
    if (seq !== nav || (refresh && !settled('run', id)) || r.status === 401) return;
    shown = seq;
    if (state.runId !== id) state.review = null;
    state.runId = id;
    show('run');
    if (r.status !== 200) {
      $('run-h').textContent = 'Run ' + id;
      problem($('run-problem'), errorText(r));
      $('run-body').replaceChildren();
      return;
    }
    problem($('run-problem'), '');
    renderRun(r.data, focus);
  }

  function renderRun(review, focus) {
    const old = state.review;
    const keep = old && old.run.run_id === review.run.run_id ? {
      feedback: $('feedback') ? $('feedback').value : '',
      message: $('action-msg') ? { text: $('action-msg').textContent, cls: $('action-msg').className } : null,
      focused: document.activeElement && document.activeElement.id,
      whole: !!($('changes') && $('changes').classList.contains('whole')),
    } : null;
    state.review = review;
    const run = review.run;
    document.title = 'Run ' + run.run_id + ' — starplan review';
    $('run-h').textContent = 'Run ' + run.run_id;
    // What a reviewer needs first comes first: what went wrong, what the run changes (the
    // changed fields; whole rows behind a toggle), the answer; then the decision, after the
    // changes, so nothing can be approved before they were on screen; then the details.
    const body = [
      lead(review),
      el('p', { class: 'status-line' },
        el('span', { class: 'badge ' + run.state, id: 'run-state' }, run.state),
        el('span', {}, 'proposed by ', el('strong', { id: 'proposed-by' }, proposedBy(review))),
        run.subject ? el('span', {}, 'on behalf of ', el('strong', { id: 'subject' }, safe(run.subject))) : null,
        timeEl(run.time)),
      review.headline ? el('p', { class: 'headline', id: 'headline' }, review.headline) : null,
      el('h2', { class: 'compact' }, 'Request, as the proposer wrote it'),
      run.request ? el('blockquote', { class: 'request' }, safe(run.request)) : el('p', { class: 'request none' }, '(no request given)'),
      changesHead(review),
      changes(review),
      el('h2', {}, 'Answer'),
      el('p', { class: 'answer', id: 'answer' }, run.answer_text ? safe(run.answer_text, true) : '(no answer_text)'),
      decision(review),
      el('h2', {}, 'Details'),
      facts(review),
      el('details', { id: 'plan-box', open: failed(run) }, el('summary', {}, 'Plan (' + planSummary(run) + ')'), plan(run, diagnostics(review))),
    ];
    if (run.stdout) body.push(el('details', {}, el('summary', {}, 'Printed output'), el('pre', { class: 'out' }, safe(run.stdout, true))));
    $('run-body').replaceChildren(...body.filter(Boolean));
    if (keep && keep.whole && $('changes')) setWhole(true);
    if (keep) {
      if ($('feedback')) $('feedback').value = keep.feedback;
      if (keep.message && keep.message.text && $('action-msg')) {
        $('action-msg').textContent = keep.message.text;
        $('action-msg').className = keep.message.cls;
      }
      if (keep.focused && $(keep.focused)) $(keep.focused).focus();
    } else if (focus) {
      $('run-h').focus();
    }
  }

  function facts(review) {
    const run = review.run;
    const rows = [
      ['Outcome', run.outcome],
      ['STATUS', run.status || '(none)'],
      ['Proposed by', proposedBy(review)],
      ['Made', timeEl(run.time)],
    ];
    const approvals = approvalsText(run);
    if (approvals) rows.push(['Approvals', approvals]);
    if (run.auto_approved_by_rule) rows.push(['Auto-approved by rule', run.auto_approved_by_rule]);
    if (run.applied_at) rows.push(['Applied', timeEl(run.applied_at)]);
    if (run.decision) rows.push(['Rejected', el('span', {}, 'by ', run.rejected_by || run.decision.origin, ', ', timeEl(run.decision.time))]);
    else if (run.rejected_by) rows.push(['Rejected by', run.rejected_by]);
    rows.push(['Changes', review.summary || 'none']);
    rows.push(['Digest', el('code', { id: 'digest' }, run.digest)]);
    return el('dl', { class: 'facts' }, rows.map(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
  }

  // decision is what a reviewer can do with the run, or what was decided.
  function decision(review) {
    const run = review.run;
    const msg = el('p', { id: 'action-msg', role: 'status', class: '' });
    const box = el('section', { class: 'actions', id: 'decision', 'aria-labelledby': 'decision-h' }, el('h2', { id: 'decision-h' }, 'Decision'));
    const who = el('p', { id: 'approvals', class: 'who' },
      'Proposed by ', el('strong', {}, proposedBy(review)),
      approvalsText(run) ? '; approvals: ' + approvalsText(run) : '',
      run.auto_approved_by_rule ? '; auto-approved by rule ' + run.auto_approved_by_rule : '',
      run.rejected_by ? '; rejected by ' + run.rejected_by : '', '.');
    const rejectForm = () => el('form', { id: 'reject-form', onsubmit: (ev) => { ev.preventDefault(); reject(run); } },
      el('label', { for: 'feedback' }, 'Feedback for the planner'),
      el('textarea', { id: 'feedback', name: 'feedback', rows: 3 }),
      el('button', { type: 'submit', id: 'reject', class: 'danger' }, 'Reject'));
    if (AWAITING.includes(run.state)) {
      box.append(
        who,
        el('p', { class: 'hint' }, 'Approving applies exactly the changes above (digest ', el('code', {}, short(run.digest)), '). If the data they were made from has moved since, nothing is written and the conflict is shown.'),
        el('div', { class: 'row' }, el('button', { type: 'button', id: 'approve', class: 'primary', onclick: () => approve(run) }, 'Approve and apply')),
        rejectForm(),
        msg);
      return box;
    }
    if (run.state === 'expired') {
      box.append(who, el('p', { id: 'decided', class: 'notice' }, 'Expired: this run waited too long to be approved. It can only be rejected, or its plan run again.'), rejectForm(), msg);
      return box;
    }
    let text = '';
    let cls = 'notice';
    switch (run.state) {
      case 'applied': text = 'Applied: these changes were written.'; cls = 'done'; break;
      case 'rejected': text = 'Rejected with this feedback: ' + (run.decision && run.decision.feedback ? run.decision.feedback : '(none)'); break;
      case 'conflict': text = 'Not applied: the data moved since this run was made. ' + firstMessage(review); cls = 'problem'; break;
      case 'done': text = 'Nothing to apply: the run changes no data.'; break;
      default: text = 'Nothing to apply: the plan failed (' + run.outcome + '); what went wrong is at the top.'; cls = 'problem';
    }
    if (run.proposed_by || run.approved_by || run.rejected_by || run.auto_approved_by_rule) box.append(who);
    box.append(el('p', { id: 'decided', class: cls }, text));
    if (run.state === 'rejected' && review.replans) {
      box.append(el('p', { class: 'hint' }, 'The model is asked for a new plan with this feedback; it joins the queue when it is ready.'));
    } else if (run.state === 'rejected' && review.proposer.startsWith('ask')) {
      box.append(el('p', { class: 'hint' }, 'This server has no model, so nothing replans: run starplan ask again with the feedback in the request.'));
    }
    box.append(msg);
    return box;
  }

  // diagnostics are the run's, most serious first (the server orders them).
  function diagnostics(review) {
    return review.diagnostics || review.run.diagnostics || [];
  }

  function firstMessage(review) {
    const d = diagnostics(review)[0];
    return d ? sentence(d.message, d.hint) : '';
  }

  const AWAITING = ['pending', 'awaiting-approval'];

  function failed(run) {
    return run.state === 'failed' || run.state === 'conflict';
  }

  // proposedBy names who proposed the run: the credential (proposed_by) when the run document
  // has it, with the way it came in.
  function proposedBy(review) {
    const by = review.run.proposed_by;
    return by ? by + ' (' + review.proposer + ')' : review.proposer;
  }

  // approvalsText is "1 of 2: bob" when the run document counts approvals, else ''.
  function approvalsText(run) {
    const got = Array.isArray(run.approved_by) ? run.approved_by : [];
    const need = run.approvals_needed || 0;
    if (!got.length && !need) return '';
    return got.length + (need ? ' of ' + need : '') + (got.length ? ': ' + got.join(', ') : ' so far');
  }

  // lead is what went wrong with a failed run, the most serious diagnostic first.
  function lead(review) {
    const run = review.run;
    const ds = diagnostics(review);
    if (!failed(run) || !ds.length) return null;
    const d = ds[0];
    const rest = ds.length - 1;
    return el('section', { id: 'lead', class: 'problem', 'aria-labelledby': 'lead-h' },
      el('h2', { id: 'lead-h', class: 'compact' }, run.state === 'conflict' ? 'Not applied: the data moved' : 'The plan failed (' + run.outcome + ')'),
      el('p', { id: 'lead-diag', 'data-code': d.code }, d.code + (d.line ? ' (line ' + d.line + ')' : '') + ': ' + sentence(d.message, d.hint)),
      rest ? el('p', { class: 'hint' }, rest + (rest === 1 ? ' more diagnostic' : ' more diagnostics') + ' in the plan below.') : null);
  }

  function planSummary(run) {
    const n = (run.program || '').split('\n').length;
    const notes = (run.rewrites || []).length + (run.diagnostics || []).length;
    return n + (n === 1 ? ' line' : ' lines') + (notes ? ', ' + notes + ' notes' : '');
  }

  function short(digest) {
    return digest ? digest.slice(0, 19) + '…' : '';
  }

  function say(text, cls) {
    const m = $('action-msg');
    if (!m) return;
    m.textContent = text;
    m.className = cls;
  }

  async function approve(run) {
    $('approve').disabled = true;
    say('Applying…', 'notice');
    const r = await api('POST', '/v1/runs/' + encodeURIComponent(run.run_id) + '/apply', { digest: run.digest });
    let text, cls;
    if (r.status === 200 && r.data && r.data.state && r.data.state !== 'applied') {
      text = 'Approval recorded: ' + (approvalsText(r.data) || 'more are needed') + '. It is applied when enough approvers agree.'; cls = 'notice';
    } else if (r.status === 200) {
      text = 'Applied.'; cls = 'done';
    } else if (r.status === 409 && r.data && r.data.state === 'conflict') {
      text = 'Not applied: the data moved, so nothing was written. Run the plan again for a new run.'; cls = 'problem';
    } else if (r.data && r.data.error && r.data.error.code === 'digest-mismatch') {
      text = 'Not applied: this run is not the one the page showed. Review it again below.'; cls = 'problem';
    } else {
      text = 'Not applied. ' + errorText(r); cls = 'problem';
    }
    await openRun(run.run_id, false, true);
    say(text, cls);
    if ($('action-msg')) $('action-msg').focus();
  }

  async function reject(run) {
    const feedback = $('feedback').value;
    $('reject').disabled = true;
    const r = await api('POST', '/v1/runs/' + encodeURIComponent(run.run_id) + '/reject', { feedback });
    let text, cls;
    if (r.status === 200) {
      text = 'Rejected; the feedback is kept with the run.'; cls = 'done';
    } else {
      text = 'Not rejected. ' + errorText(r); cls = 'problem';
    }
    await openRun(run.run_id, false, true);
    say(text, cls);
  }

  // ---- the diff

  // changesHead is the heading of the changes, with the toggle that shows whole rows (the
  // unchanged fields of updated rows) when there are any.
  function changesHead(review) {
    const same = review.tables.reduce((n, t) => n + t.rows.reduce((m, r) => m + r.cells.filter((c) => !c.changed).length, 0), 0);
    return el('div', { class: 'changes-head' },
      el('h2', { id: 'changes-h' }, 'Changes'),
      same ? el('button', { type: 'button', id: 'whole-rows', class: 'quiet', 'aria-pressed': 'false', 'aria-controls': 'changes',
        'data-same': same, onclick: () => setWhole(!$('changes').classList.contains('whole')) }, wholeLabel(false, same)) : null);
  }

  function wholeLabel(whole, same) {
    return whole ? 'Show the changed fields only' : 'Show whole rows (' + same + ' unchanged ' + (same === 1 ? 'field' : 'fields') + ')';
  }

  function setWhole(whole) {
    const c = $('changes');
    const b = $('whole-rows');
    if (!c || !b) return;
    c.classList.toggle('whole', whole);
    b.setAttribute('aria-pressed', String(whole));
    b.textContent = wholeLabel(whole, Number(b.dataset.same));
  }

  // changes lays out each changed row as a table of its fields: an updated row shows the
  // fields that changed (the others are there, hidden until whole rows are asked for); an
  // inserted row its new values, a deleted row its old ones.
  function changes(review) {
    if (!review.tables.length) return el('p', { id: 'changes' }, 'This run changes no data.');
    return el('div', { id: 'changes' }, review.tables.map((t) => el('section', { 'data-table': t.table, 'aria-label': t.summary },
      el('h3', {}, t.summary),
      t.rows.map((row) => {
        const cols = row.change === 'inserted' ? ['after'] : row.change === 'deleted' ? ['before'] : ['before', 'after'];
        const names = { before: row.change === 'deleted' ? 'Old value' : 'Before', after: row.change === 'inserted' ? 'New value' : 'After' };
        return el('div', { class: 'scroll' }, el('table', { class: 'diff ' + row.change },
          el('caption', {}, t.table + ' ' + row.key + ' (' + row.change + (row.via ? ' by helper ' : ')'),
            row.via ? el('code', { class: 'via' }, row.via) : null, row.via ? ')' : null),
          el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, 'Field'), cols.map((c) => el('th', { scope: 'col' }, names[c])))),
          el('tbody', {}, row.cells.map((c) => cellRow(c, cols)))));
      }))));
  }

  function side(cls, v) {
    if (v === undefined) return el('td', { class: cls + ' none' }, '—');
    return el('td', { class: cls }, v);
  }

  function cellRow(c, cols) {
    const tr = el('tr', { class: c.changed ? 'changed' : 'same', 'data-path': c.path }, el('th', { scope: 'row' }, c.path));
    if (c.words && c.words.length) {
      const td = el('td', { class: 'words', colspan: 2 });
      for (const w of c.words) {
        if (w.same) td.append(document.createTextNode(w.same));
        if (w.del) td.append(el('del', {}, w.del));
        if (w.ins) td.append(el('ins', {}, w.ins));
      }
      tr.append(td);
      return tr;
    }
    for (const col of cols) tr.append(side(col, c[col]));
    return tr;
  }

  // ---- the plan, with its rewrites and diagnostics at their lines

  function plan(run, diags) {
    const lines = (run.program || '').split('\n');
    const notes = new Map();
    const top = [];
    const add = (line, node) => {
      if (line > 0 && line <= lines.length) {
        if (!notes.has(line)) notes.set(line, []);
        notes.get(line).push(node);
      } else top.push(node);
    };
    for (const rw of run.rewrites || []) {
      add(rw.line, el('tr', { class: 'note rewrite' }, el('th', {}, ''), el('td', {},
        'Rewritten (' + rw.rule + '): ', el('code', {}, rw.before), ' → ', el('code', {}, rw.after))));
    }
    for (const d of diags) {
      add(d.line, el('tr', { class: 'note diag' }, el('th', {}, ''), el('td', {},
        d.stage + ' · ' + d.code + (d.line ? ' (line ' + d.line + (d.col ? ':' + d.col : '') + ')' : '') + ': ' + sentence(d.message, d.hint))));
    }
    const rows = [];
    lines.forEach((text, i) => {
      const n = i + 1;
      rows.push(el('tr', { class: notes.has(n) ? 'marked' : '', id: 'line-' + n }, el('th', { scope: 'row' }, String(n)), el('td', { class: 'code' }, text)));
      if (notes.has(n)) rows.push(...notes.get(n));
    });
    return el('div', { class: 'scroll' }, el('table', { class: 'plan', 'aria-label': 'The plan, with rewrites and diagnostics at their lines' },
      el('tbody', {}, top, rows)));
  }

  // ---- live updates from /v1/events

  function startEvents() {
    if (state.events || !window.EventSource) return;
    const es = new EventSource('/v1/events?' + KEY_PARAM + '=' + encodeURIComponent(state.key), { withCredentials: true });
    state.events = es;
    es.onopen = () => { $('live').textContent = 'Live'; };
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED) {
        $('live').textContent = 'Disconnected';
        state.events = null;
        // A closed stream: the session may have ended. Ask once; a 401 shows the login form.
        api('GET', '/review/queue?filter=pending').then((r) => { if (r.status === 200) setTimeout(startEvents, 2000); });
      } else {
        $('live').textContent = 'Reconnecting…';
      }
    };
    for (const type of ['finished', 'applied', 'rejected', 'failed']) {
      es.addEventListener(type, (m) => {
        let ev = {};
        try { ev = JSON.parse(m.data); } catch (e) { /* ignore */ }
        refreshSoon(ev);
      });
    }
  }

  function stopEvents() {
    if (state.events) state.events.close();
    state.events = null;
  }

  // refreshSoon redraws what events may have changed, once per burst of events: the queue on
  // screen, or the run on screen if an event was about it. At most one refresh is in flight:
  // events that arrive meanwhile are folded into the next one, which starts when it ends.
  const changed = new Set();
  let stale = false;
  function refreshSoon(ev) {
    if (ev.run_id) changed.add(ev.run_id);
    stale = true;
    if (state.refreshing) return;
    state.refreshing = true;
    setTimeout(refresh, 150);
  }

  async function refresh() {
    const runs = new Set(changed);
    changed.clear();
    stale = false;
    try {
      if (state.view === 'queue') await openQueue(state.filter, false, true);
      else if (state.view === 'run' && runs.has(state.runId)) await openRun(state.runId, false, true);
    } finally {
      if (stale) setTimeout(refresh, 150);
      else state.refreshing = false;
    }
  }

  // ---- keys

  function onKey(ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const t = ev.target;
    const typing = t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.isContentEditable);
    if (ev.key === 'Escape' && state.view === 'run') {
      if (typing) { t.blur(); return; }
      location.hash = '#/queue/' + state.filter;
      return;
    }
  }

  // onKeyUp moves the focus for a and r once the key is released, so the letter is never typed
  // into the field it moves to.
  function onKeyUp(ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || state.view !== 'run') return;
    const t = ev.target;
    if (t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.isContentEditable)) return;
    if (ev.key === 'a' && $('approve')) $('approve').focus();
    if (ev.key === 'r' && $('feedback')) $('feedback').focus();
  }

  // ---- start

  async function started() {
    $('logout-form').hidden = false;
    startEvents();
    await route();
  }

  async function boot() {
    $('login-form').addEventListener('submit', login);
    $('logout-form').addEventListener('submit', logout);
    window.addEventListener('hashchange', route);
    document.addEventListener('keydown', onKey);
    document.addEventListener('keyup', onKeyUp);
    setInterval(tickAges, 30000);
    if (location.hash.startsWith('#/login/')) return route();
    keepKey(sessionKey());
    if (!state.key) return needLogin();
    const r = await api('GET', '/review/queue?filter=pending');
    if (r.status === 200) started();
  }

  document.addEventListener('DOMContentLoaded', boot);
})();
