package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.starlark.net/starlark"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/contracts"
	"github.com/starplan/starplan/diag"
	"github.com/starplan/starplan/internal/errcode"
	"github.com/starplan/starplan/sandbox"
	"github.com/starplan/starplan/store"
	"github.com/starplan/starplan/table"
)

// Who is who proposed a run and who decided on it, as its record and its result name them:
// credentials by name, the local user as "local:<user>" (access.Principal.Name).
type Who struct {
	// ProposedBy is the principal whose request made the run (Request.By).
	ProposedBy string `json:"proposed_by"`
	// ApprovedBy lists the people who approved the run, in order.
	ApprovedBy []string `json:"approved_by,omitempty"`
	// RejectedBy is who rejected it.
	RejectedBy string `json:"rejected_by,omitempty"`
	// AutoApprovedByRule names the domain's auto rule that let it through without a person.
	AutoApprovedByRule string `json:"auto_approved_by_rule,omitempty"`
	// ApprovalsNeeded is how many approvals the run needs in all, while it awaits them or when
	// more than one was needed.
	ApprovalsNeeded int `json:"approvals_needed,omitempty"`
}

// ApplyOptions say who applies a run, and from where.
type ApplyOptions struct {
	// Origin is the command or transport ("apply", "serve:http", ...), kept with the apply.
	Origin string
	// By is who applies; the zero value is the local user (access.Local).
	By access.Principal
}

// RejectOptions say who rejects a run, why, and from where.
type RejectOptions struct {
	Feedback string
	Origin   string
	// By is who rejects; the zero value is the local user (access.Local).
	By access.Principal
}

// orLocal is p, or the local user when p is the zero value.
func orLocal(p access.Principal) access.Principal {
	if p.Name == "" {
		return access.Local()
	}
	return p
}

// ApprovalError is an apply that the domain's approval rules refuse: the principal may not
// approve the run (a proposer with no auto rule that lets it through, one's own run under four
// eyes), or the run expired. The run is left as it was.
type ApprovalError struct {
	RunID string
	// Code is errcode.ApprovalRequired or errcode.RunExpired.
	Code    string
	Problem string
	Hint    string
}

func (e *ApprovalError) Error() string { return fmt.Sprintf("run %s: %s", e.RunID, e.Problem) }

// mayApprove says whether by's approval counts for rec, and why not.
func (e *Engine) mayApprove(rec *RunRecord, by access.Principal) (bool, string) {
	if !by.Can(access.Approve) {
		return false, fmt.Sprintf("%s holds the %s role, which may apply a run only when an auto rule of the domain lets it through", by.Name, by.Role)
	}
	if rec.ProposedBy != by.Name {
		return true, ""
	}
	if e.policy.Approval.Always() {
		return false, fmt.Sprintf("%s proposed this run, and the domain requires an approver who is not its proposer (four_eyes always)", by.Name)
	}
	if by.Role == access.Admin || by.IsLocal() {
		return true, ""
	}
	return false, fmt.Sprintf("%s proposed this run; it needs an approver who is not its proposer (four eyes)", by.Name)
}

// expired reports whether rec waited longer than the domain's pending_ttl.
func (e *Engine) expired(rec *RunRecord, now time.Time) bool {
	ttl := e.policy.Approval.TTL()
	return ttl > 0 && rec.Pending && now.Sub(rec.Time) > ttl
}

// Expired reports whether a run, pending, waited longer than the domain's pending_ttl (by the
// engine's clock): it can then only be rejected or run again.
func (e *Engine) Expired(rec *RunRecord) bool { return e.expired(rec, e.opts.Now()) }

// decideApply applies rec on behalf of by when the domain's approval rules allow it: by's
// approval completes those the run needs, or an auto rule lets the change set being committed
// through. An approval that does not complete them is recorded, and the run keeps waiting.
// Otherwise it returns an *ApprovalError and leaves the run as it was. The caller holds applyMu.
func (e *Engine) decideApply(ctx context.Context, rec *RunRecord, res *Result, by access.Principal) error {
	if e.expired(rec, e.opts.Now()) {
		return &ApprovalError{RunID: rec.ID, Code: errcode.RunExpired,
			Problem: fmt.Sprintf("waited for approval longer than the domain's pending_ttl (%s); it can no longer be applied", e.policy.Approval.PendingTTL),
			Hint:    "reject it, or run the plan again against the current data"}
	}
	person, why := e.mayApprove(rec, by)
	if person && slices.Contains(rec.ApprovedBy, by.Name) {
		return &ApprovalError{RunID: rec.ID, Code: errcode.ApprovalRequired,
			Problem: fmt.Sprintf("%s already approved it; it needs %d approvals, %d so far", by.Name, e.policy.Approval.Required(), len(rec.ApprovedBy)),
			Hint:    "another approver must approve it"}
	}
	need := e.policy.Approval.Required()
	approvals := rec.ApprovedBy
	if person {
		approvals = append(slices.Clone(approvals), by.Name)
	}
	if person && len(approvals) >= need {
		if need > 1 {
			rec.ApprovalsNeeded = need
		}
		return e.applyRecord(ctx, rec, res, by, false, approvals)
	}
	var refusals []string
	if len(e.policy.Approval.Auto) > 0 {
		err := e.applyRecord(ctx, rec, res, by, true, approvals)
		var refused *autoRefusal
		if !errors.As(err, &refused) {
			return err
		}
		refusals = refused.reasons
	}
	if person { // one approval of several: recorded, and the run waits for the rest
		rec.ApprovedBy, rec.ApprovalsNeeded = approvals, need
		if err := e.writeRecord(ctx, rec, false, ChainApproved, by.Name); err != nil {
			return err
		}
		res.Who = rec.Who
		return nil
	}
	problem := "needs approval: " + why
	if len(refusals) > 0 {
		problem += "; no auto rule lets it through (" + strings.Join(refusals, "; ") + ")"
	}
	return &ApprovalError{RunID: rec.ID, Code: errcode.ApprovalRequired, Problem: problem,
		Hint: "an approver who is not its proposer must apply it (on the review page, or starplan apply " + rec.ID + " with an approver's credential)"}
}

// autoRefusal is the verify error of an apply that no auto rule let through.
type autoRefusal struct{ reasons []string }

func (e *autoRefusal) Error() string {
	return "no auto rule lets the changes through: " + strings.Join(e.reasons, "; ")
}

// autoCheck is the auto rules' verdict on cs, the change set being committed: the rule's name,
// or an *autoRefusal.
func (e *Engine) autoCheck(cs table.ChangeSet) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), invariantsTime)
	defer cancel()
	v, err := e.policy.AutoApprove(ctx, cs)
	if err != nil {
		return "", err
	}
	if v.Rule == "" {
		return "", &autoRefusal{v.Refusals}
	}
	return v.Rule, nil
}

// writeRecord writes rec again (its decision changed) with its chain entry, under the apply
// lock the caller holds.
func (e *Engine) writeRecord(ctx context.Context, rec *RunRecord, rejected bool, event, by string) error {
	err := e.audit.writeWith(e.opts.Now(), []link{{doc: recordDoc(rec, rejected), event: event, by: func() string { return by }, read: rec.chainRead}}, func(docs []store.SysDoc) error {
		// Another server's decision since this one read the run pending: its record stands.
		if err := e.decidedElsewhere(rec.ID, true, rec.chainRead); err != nil {
			return err
		}
		return e.st.PutSysDocs(ctx, docs...)
	})
	if errors.Is(err, errDecidedElsewhere) {
		if serr := e.settledElsewhere(rec.ID, rec.chainRead != ""); serr != nil {
			return serr
		}
	}
	if err != nil {
		return fmt.Errorf("recording run %s: %w", rec.ID, err)
	}
	return nil
}

// bindNeedsPerson loads the functions the domain's needs_person rules name from its
// invariants.star (src) and binds them.
func bindNeedsPerson(policy *contracts.Domain, src string) error {
	names := policy.Approval.NeedsPersonFunctions()
	if len(names) == 0 {
		return nil
	}
	fns, ds := loadNeedsPerson(src)
	if len(ds) > 0 {
		return fmt.Errorf("%s: %s", InvariantsFile, ds[0])
	}
	return policy.BindNeedsPerson(fns)
}

// loadNeedsPerson returns every function of invariants.star as a needs_person predicate: it
// gets the change set (as an invariant does) and returns None, or a string saying why a person
// must look. It runs under invariantLimits.
func loadNeedsPerson(src string) (map[string]contracts.NeedsPerson, diag.List) {
	reg, ds := sandbox.NewEnv().LoadModule(InvariantsFile, src, false)
	if len(ds) > 0 {
		return nil, ds
	}
	out := map[string]contracts.NeedsPerson{}
	for _, h := range reg {
		fn, name := h.Value, h.Name
		out[name] = func(ctx context.Context, cs table.ChangeSet) (string, error) {
			v, _, err := sandbox.Call(ctx, fn.(starlark.Callable), starlark.Tuple{changeSetValue(cs)}, invariantLimits)
			if err != nil {
				return "", err
			}
			switch v := v.(type) {
			case starlark.NoneType:
				return "", nil
			case starlark.String:
				if v == "" {
					return "", fmt.Errorf("%s returned an empty reason; return None when no person is needed", name)
				}
				return clipped(string(v), MaxMessage), nil
			}
			return "", fmt.Errorf("%s returned %s; return None, or a string saying why a person must look", name, v.Type())
		}
	}
	return out, nil
}
