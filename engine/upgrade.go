package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/starplan/starplan/access"
	"github.com/starplan/starplan/store"
)

// UpgradeOptions are the options of UpgradeDomain.
type UpgradeOptions struct {
	// ExpirePending rejects the runs still pending (made under the old definition) in the
	// upgrade's commit, instead of refusing the upgrade while there are any.
	ExpirePending bool
	// By is who upgrades (the local user when zero); Origin is where ("cli", ...).
	By     access.Principal
	Origin string
}

// UpgradeReport is what UpgradeDomain did.
type UpgradeReport struct {
	Domain string `json:"domain"`
	// Definition is the SHA-256 of the definition recorded now (DefinitionDigest), which the
	// audit chain's ChainDomain entry names.
	Definition string `json:"definition_sha256"`
	// Expired lists the pending runs rejected with the upgrade (ExpirePending).
	Expired []string `json:"expired"`
}

// PendingRunsError refuses an upgrade while runs made under the old definition wait for review.
type PendingRunsError struct{ IDs []string }

func (e *PendingRunsError) Error() string {
	return fmt.Sprintf("%d runs made under the current definition are pending (%s); nothing was changed", len(e.IDs), strings.Join(e.IDs, ", "))
}

// Hint says what to do about a *PendingRunsError.
func (e *PendingRunsError) Hint() string {
	return "apply or reject them first (starplan runs --state pending), or pass --expire-pending to reject them with the upgrade"
}

// DefinitionDigest is one SHA-256 over a domain's definition files: each file's name and
// content, in name order.
func DefinitionDigest(def map[string]string) string {
	h := sha256.New()
	for _, name := range slices.Sorted(maps.Keys(def)) {
		fmt.Fprintf(h, "%s\x00%d\x00%s", name, len(def[name]), def[name])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// UpgradeDomain records dom, a new version of the store's domain, as the store's definition
// (store.DomainUpgrader: every row must fit it, or nothing changes and the error lists the
// rows), with an entry of the audit chain (ChainDomain) naming the new definition's digest and
// who upgraded, in one commit. Runs still pending were made under the old definition: it refuses
// with a *PendingRunsError while there are any, unless opts.ExpirePending, which rejects them in
// the same commit. The engine and its store serve nothing more afterwards: close both, and open
// the store again to use the new definition.
func (e *Engine) UpgradeDomain(ctx context.Context, dom *store.Domain, opts UpgradeOptions) (*UpgradeReport, error) {
	up, ok := e.st.(store.DomainUpgrader)
	if !ok {
		return nil, errors.New("this store cannot record a new domain definition")
	}
	if err := e.audit.flush(); err != nil {
		return nil, err
	}
	e.applyMu.Lock() // no apply or rejection between the pending runs read and the commit
	defer e.applyMu.Unlock()
	page, err := e.ListRuns(ListOptions{State: StatePending})
	if err != nil {
		return nil, err
	}
	rep := &UpgradeReport{Domain: dom.Name, Definition: DefinitionDigest(dom.Definition), Expired: []string{}}
	for _, r := range page.Runs {
		rep.Expired = append(rep.Expired, r.ID)
	}
	slices.Sort(rep.Expired)
	if len(rep.Expired) > 0 && !opts.ExpirePending {
		return nil, &PendingRunsError{IDs: rep.Expired}
	}
	by, now := orLocal(opts.By), e.opts.Now()
	var docs []store.SysDoc
	var links []link
	for _, id := range rep.Expired {
		if err := e.audit.flush(); err != nil { // as Record: the record as stored
			return nil, err
		}
		rec, err := e.storedRecordFor(id, true)
		if err != nil {
			return nil, err
		}
		d := &Decision{RunID: id, Decision: DecisionRejected, Origin: opts.Origin, By: by.Name, Time: now,
			Feedback: "expired: the domain's definition was upgraded after the run was made"}
		rec.RejectedBy, rec.Pending, rec.Writes = by.Name, false, nil
		rec.ApplyError = "expired by the domain upgrade"
		docs = append(docs, store.SysDoc{Collection: decisionCollection, ID: id, Value: d})
		links = append(links, link{doc: recordDoc(rec, true), event: ChainRejected, by: func() string { return by.Name }, read: rec.chainRead})
	}
	links = append(links, link{event: ChainDomain, by: func() string { return by.Name }, definition: rep.Definition})
	err = e.chain.write(now, func(chained []store.SysDoc) error { return up.UpgradeDomain(ctx, dom, append(docs, chained...)...) }, links...)
	if err != nil {
		return nil, err
	}
	return rep, nil
}
