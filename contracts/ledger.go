package contracts

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/starplan/starplan/table"
)

// buildLedgerPerItem checks that every stock row whose stock field changes gets exactly one new
// ledger row, with amount = price × (stock before − stock after): positive when stock goes down
// (a sale), negative when it goes up (a return). Ledger rows carry no item reference, so the check
// matches the multiset of expected amounts against the new rows' amounts within Tolerance; a
// perfect matching proves "exactly one per item". What is left over is explained as precisely as
// possible: one row per unit, one row for the whole order, a wrong sign, a wrong amount, and
// finally an item without a row or a row without an item.
//
// The price is read from the row before the run. Inserted and removed stock rows are not sales;
// other rules (no_inserts, no_deletes) govern them.
func buildLedgerPerItem(ps *params) checkFunc {
	l := ledgerRule{
		stockTable:  ps.str("stock_table"),
		stockField:  ps.str("stock_field"),
		priceField:  ps.str("price_field"),
		ledgerTable: ps.str("ledger_table"),
		amountField: ps.str("amount_field"),
	}
	return l.check
}

type ledgerRule struct {
	stockTable, stockField, priceField, ledgerTable, amountField string
}

// stockItem is one stock row whose stock changed.
type stockItem struct {
	key           any
	before, after string  // the stock values, exactly as stored
	delta         float64 // before − after: units that left (> 0) or came back (< 0)
	price         float64
	want          float64 // price × delta
	done          bool
}

// units is the number of units that left (> 0) or came back (< 0).
func (it *stockItem) units() float64 { return it.delta }

// stockDelta returns before − after of a stock field and whether it changed. Integers are
// compared and subtracted exactly, at any magnitude (as floats, 2^53 + 1 → 2^53 would be no
// change at all); the difference is then a float64, as amounts are.
func stockDelta(before, after any) (delta float64, changed, ok bool) {
	bi, ok1 := toInt(before)
	ai, ok2 := toInt(after)
	if ok1 && ok2 {
		if bi == ai {
			return 0, false, true
		}
		if d := bi - ai; (bi^ai)&(bi^d) >= 0 {
			return float64(d), true, true // exact in int64: one rounding, as big.Float's
		}
		d, _ := new(big.Float).Sub(new(big.Float).SetInt64(bi), new(big.Float).SetInt64(ai)).Float64()
		return d, true, true
	}
	b, ok1 := toFloat(before)
	a, ok2 := toFloat(after)
	if !ok1 || !ok2 {
		return 0, false, false
	}
	return b - a, b != a, true
}

// ledgerEntry is one new ledger row.
type ledgerEntry struct {
	key    any
	amount float64
	done   bool
}

// sameMoney reports whether a and b are the same amount of money: both whole cents and equal in
// cents. Binary floating point cannot hold most cents exactly (0.1 + 0.2), so a value counts as
// whole cents when it is within centNoise of one; there is no other tolerance, because a
// tolerance per row adds up over a ledger unseen, half a cent at a time.
func sameMoney(a, b float64) bool {
	ca, okA := cents(a)
	cb, okB := cents(b)
	return okA && okB && ca == cb
}

// centNoise is how far from a whole cent, in cents, a float may be and still be that cent: far
// above the rounding error of sums of cents (about 1e-8 cents at a billion), far below any
// amount a plan could mean.
const centNoise = 1e-3

// cents returns x in whole cents, or false when x is not a whole number of cents.
func cents(x float64) (int64, bool) {
	c := x * 100
	r := math.Round(c)
	if math.Abs(c-r) > centNoise || math.Abs(r) > 1<<53 {
		return 0, false
	}
	return int64(r), true
}

func (l *ledgerRule) check(p *pass) error {
	var items []stockItem
	if t := p.changes(l.stockTable); t != nil {
		for _, u := range t.Updated {
			delta, changed, ok := stockDelta(u.Before[l.stockField], u.After[l.stockField])
			if !ok || !changed {
				continue // not a stock change, or a schema problem reported elsewhere
			}
			price, ok := toFloat(u.Before[l.priceField])
			if !ok {
				continue
			}
			items = append(items, stockItem{key: u.Key, before: formatExact(u.Before[l.stockField]), after: formatExact(u.After[l.stockField]),
				delta: delta, price: price, want: price * delta})
		}
	}
	var entries []ledgerEntry
	lt := p.changes(l.ledgerTable)
	if lt != nil {
		for _, r := range lt.Inserted {
			a, ok := toFloat(r[l.amountField])
			if !ok {
				p.reportf(CodeLedgerAmount, fmt.Sprintf("set %s to a number: price × units", l.amountField),
					"new %s row %s has %s %s; it must be a number", l.ledgerTable, rowKey(lt, r), l.amountField, table.FormatValue(r[l.amountField]))
				continue
			}
			if _, whole := cents(a); !whole {
				p.reportf(CodeLedgerAmount, fmt.Sprintf("round %s to cents: round(amount, 2)", l.amountField),
					"new %s row %s has %s %s, which is not a whole number of cents; money is kept in whole cents", l.ledgerTable, rowKey(lt, r), l.amountField, strconv.FormatFloat(a, 'f', -1, 64))
				continue
			}
			entries = append(entries, ledgerEntry{key: r[lt.Key], amount: a})
		}
	}
	if len(items) == 0 && len(entries) == 0 {
		return nil
	}
	l.matchExact(items, entries)
	l.perUnit(p, items, entries)
	l.wholeOrder(p, items, entries)
	l.wrongSign(p, items, entries)
	l.rest(p, items, entries)
	return nil
}

// matchExact pairs items and entries whose amounts agree, choosing a maximum matching: both are
// sorted by amount and walked together, which is optimal for matching within a tolerance.
func (l *ledgerRule) matchExact(items []stockItem, entries []ledgerEntry) {
	if len(items) == 1 && len(entries) == 1 { // the common case, without sorting
		if sameMoney(items[0].want, entries[0].amount) {
			items[0].done, entries[0].done = true, true
		}
		return
	}
	var ibuf, ebuf [8]int
	ii, ei := ibuf[:0], ebuf[:0]
	for i := range items {
		ii = append(ii, i)
	}
	for i := range entries {
		ei = append(ei, i)
	}
	slices.SortFunc(ii, func(a, b int) int { return cmpFloat(items[a].want, items[b].want) })
	slices.SortFunc(ei, func(a, b int) int { return cmpFloat(entries[a].amount, entries[b].amount) })
	for i, j := 0, 0; i < len(ii) && j < len(ei); {
		it, e := &items[ii[i]], &entries[ei[j]]
		switch {
		case sameMoney(it.want, e.amount):
			it.done, e.done = true, true
			i++
			j++
		case it.want < e.amount:
			i++
		default:
			j++
		}
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// perUnit recognises an item with n ≥ 2 units and exactly n unmatched entries of one unit each.
func (l *ledgerRule) perUnit(p *pass, items []stockItem, entries []ledgerEntry) {
	for i := range items {
		it := &items[i]
		n := math.Abs(it.units())
		if it.done || n < 2 || n != math.Trunc(n) {
			continue
		}
		unit := it.want / n // the signed amount of one unit
		var keys []string
		for j := range entries {
			if !entries[j].done && sameMoney(entries[j].amount, unit) {
				keys = append(keys, table.FormatValue(entries[j].key))
			}
		}
		if float64(len(keys)) != n {
			continue
		}
		it.done = true
		for j := range entries {
			if !entries[j].done && sameMoney(entries[j].amount, unit) {
				entries[j].done = true
			}
		}
		p.reportf(CodeLedgerPerUnit,
			fmt.Sprintf("insert one %s row for %s with %s = %s (%s) instead of %s",
				l.ledgerTable, table.FormatValue(it.key), l.amountField, money(it.want), l.formula(it), strings.Join(keys, ", ")),
			"the plan inserts %d %s rows of %s (%s), one per unit of %s row %s (%s); each item gets exactly one row for all its units",
			len(keys), l.ledgerTable, money(unit), strings.Join(keys, ", "), l.stockTable, table.FormatValue(it.key), l.describeChange(it))
	}
}

// wholeOrder recognises one entry that records the sum of several items: either of the items
// still unmatched (the usual mistake) or of every changed item (an extra total row).
func (l *ledgerRule) wholeOrder(p *pass, items []stockItem, entries []ledgerEntry) {
	if len(items) < 2 {
		return
	}
	var open []*stockItem
	openSum, total := 0.0, 0.0
	for i := range items {
		total += items[i].want
		if !items[i].done {
			open = append(open, &items[i])
			openSum += items[i].want
		}
	}
	for j := range entries {
		e := &entries[j]
		if e.done {
			continue
		}
		var covered []*stockItem
		switch {
		case len(open) >= 2 && sameMoney(e.amount, openSum):
			covered = open
		case sameMoney(e.amount, total):
			covered = make([]*stockItem, len(items))
			for i := range items {
				covered[i] = &items[i]
			}
		default:
			continue
		}
		e.done = true
		parts := make([]string, len(covered))
		extra := true // every covered item already has its own row
		for i, it := range covered {
			parts[i] = table.FormatValue(it.key) + " " + money(it.want)
			extra = extra && it.done
			it.done = true
		}
		hint := fmt.Sprintf("insert one %s row per item instead: %s", l.ledgerTable, strings.Join(parts, ", "))
		if extra {
			hint = fmt.Sprintf("remove %s: each item already has its own row", table.FormatValue(e.key))
		}
		p.reportf(CodeLedgerWholeOrder, hint,
			"new %s row %s has %s %s, the total of %d items (%s) in one row; each item gets exactly one row of its own",
			l.ledgerTable, table.FormatValue(e.key), l.amountField, money(e.amount), len(covered), strings.Join(parts, " + "))
		return
	}
}

// wrongSign pairs an unmatched item with an unmatched entry of the opposite amount.
func (l *ledgerRule) wrongSign(p *pass, items []stockItem, entries []ledgerEntry) {
	for i := range items {
		it := &items[i]
		if it.done || it.want == 0 {
			continue
		}
		for j := range entries {
			e := &entries[j]
			if e.done || !sameMoney(e.amount, -it.want) {
				continue
			}
			it.done, e.done = true, true
			kind := "a sale (stock goes down) is positive"
			if it.want < 0 {
				kind = "a return (stock goes up) is negative"
			}
			p.reportf(CodeLedgerSign,
				fmt.Sprintf("set %s = %s: positive for a sale (stock down), negative for a return (stock up)", l.amountField, money(it.want)),
				"new %s row %s has %s %s for %s row %s (%s); %s",
				l.ledgerTable, table.FormatValue(e.key), l.amountField, money(e.amount), l.stockTable, table.FormatValue(it.key), l.describeChange(it), kind)
			break
		}
	}
}

// rest reports what is still unmatched. When as many items as entries remain, they are paired in
// key order as wrong amounts; otherwise each item lacks a row and each entry matches no item.
func (l *ledgerRule) rest(p *pass, items []stockItem, entries []ledgerEntry) {
	var oi []*stockItem
	var oe []*ledgerEntry
	for i := range items {
		if !items[i].done {
			oi = append(oi, &items[i])
		}
	}
	for j := range entries {
		if !entries[j].done {
			oe = append(oe, &entries[j])
		}
	}
	if len(oi) == len(oe) {
		for k := range oi {
			it, e := oi[k], oe[k]
			p.reportf(CodeLedgerAmount,
				fmt.Sprintf("set %s = %s (%s)", l.amountField, money(it.want), l.formula(it)),
				"new %s row %s has %s %s but %s row %s (%s) at %s %s needs %s",
				l.ledgerTable, table.FormatValue(e.key), l.amountField, money(e.amount),
				l.stockTable, table.FormatValue(it.key), l.describeChange(it), l.priceField, money(it.price), money(it.want))
		}
		return
	}
	for _, it := range oi {
		p.reportf(CodeLedgerMissing,
			fmt.Sprintf("insert exactly one %s row for %s with %s = %s", l.ledgerTable, table.FormatValue(it.key), l.amountField, money(it.want)),
			"%s row %s changes %s (%s) but no new %s row has %s %s (%s)",
			l.stockTable, table.FormatValue(it.key), l.stockField, l.describeChange(it), l.ledgerTable, l.amountField,
			money(it.want), l.formula(it))
	}
	for _, e := range oe {
		if len(items) == 0 {
			p.reportf(CodeLedgerUnmatched,
				fmt.Sprintf("update %s of the item the row records, or do not insert the row", l.stockField),
				"new %s row %s has %s %s but no %s row changes %s; every new row records the stock change of exactly one item",
				l.ledgerTable, table.FormatValue(e.key), l.amountField, money(e.amount), l.stockTable, l.stockField)
			continue
		}
		p.reportf(CodeLedgerUnmatched,
			"remove the row, or fix its amount to price × units of the one item it records",
			"new %s row %s has %s %s, which matches no changed item; each new row records exactly one item whose %s changes (%s)",
			l.ledgerTable, table.FormatValue(e.key), l.amountField, money(e.amount), l.stockField, l.expected(items))
	}
}

// describeChange renders an item's stock change: "10 → 7, down 3".
func (l *ledgerRule) describeChange(it *stockItem) string {
	dir := "down"
	if it.delta < 0 {
		dir = "up"
	}
	return fmt.Sprintf("%s → %s, %s %s", it.before, it.after, dir, formatNumber(math.Abs(it.units())))
}

// formula explains an item's amount: "price 60.00 × 3 units, positive as stock goes down".
func (l *ledgerRule) formula(it *stockItem) string {
	n := math.Abs(it.units())
	unit := "units"
	if n == 1 {
		unit = "unit"
	}
	sign := "positive as stock goes down"
	if it.units() < 0 {
		sign = "negative as stock goes up"
	}
	return fmt.Sprintf("%s %s × %s %s, %s", l.priceField, money(it.price), formatNumber(n), unit, sign)
}

// expected lists every changed item with the amount it needs: "SG001 needs 80.00, SG005 needs 180.00".
func (l *ledgerRule) expected(items []stockItem) string {
	parts := make([]string, len(items))
	for i := range items {
		parts[i] = table.FormatValue(items[i].key) + " needs " + money(items[i].want)
	}
	return strings.Join(parts, ", ")
}

// buildBalanceChain checks that the new ledger rows, taken in key order (table.CompareKeys), all
// sort after the last committed row and that each one's balance is the previous balance plus its
// amount, starting from the last committed row's balance (0 when the ledger is empty). After a
// break the chain continues from the row's own balance, so each break is reported once.
func buildBalanceChain(ps *params) checkFunc {
	ledgerTable := ps.str("ledger_table")
	amountField := ps.str("amount_field")
	balanceField := ps.str("balance_field")
	return func(p *pass) error {
		t := p.changes(ledgerTable)
		if t == nil || len(t.Inserted) == 0 {
			return nil
		}
		rows := t.Inserted
		byKey := func(a, b table.Row) int { return table.CompareKeys(a[t.Key], b[t.Key]) }
		if !slices.IsSortedFunc(rows, byKey) {
			rows = slices.SortedFunc(slices.Values(rows), byKey)
		}
		last, ok, err := p.lastCommitted(ledgerTable)
		if err != nil {
			return err
		}
		prev, prevFrom := 0.0, "0.00 (the ledger is empty)"
		var lastKey any
		if ok {
			lastKey = last[t.Key]
			b, isNum := toFloat(last[balanceField])
			if !isNum {
				return fmt.Errorf("committed %s row %s has %s %s, not a number", ledgerTable, table.FormatValue(lastKey), balanceField, table.FormatValue(last[balanceField]))
			}
			prev = b
			prevFrom = ""
		}
		prevKey := lastKey
		for _, r := range rows {
			key := r[t.Key]
			if ok && table.CompareKeys(key, lastKey) <= 0 {
				p.reportf(CodeLedgerOrder, fmt.Sprintf("use a key after %s (the next one in sequence)", table.FormatValue(lastKey)),
					"new %s row %s sorts before or at the last committed row %s; new rows go after it, in key order",
					ledgerTable, table.FormatValue(key), table.FormatValue(lastKey))
			}
			amount, okA := toFloat(r[amountField])
			bal, okB := toFloat(r[balanceField])
			if !okA || !okB {
				if okB {
					prev, prevKey, prevFrom = bal, key, ""
				}
				continue // not numbers: the schema's or ledger_per_item's concern
			}
			if want := prev + amount; !sameMoney(bal, want) {
				from := prevFrom
				if from == "" {
					from = fmt.Sprintf("%s of %s", money(prev), table.FormatValue(prevKey))
				}
				p.reportf(CodeBalanceChain,
					fmt.Sprintf("set %s = %s: the previous row's %s plus this row's %s", balanceField, money(want), balanceField, amountField),
					"new %s row %s has %s %s but the previous balance %s plus %s %s is %s",
					ledgerTable, table.FormatValue(key), balanceField, money(bal), from, amountField, money(amount), money(want))
			}
			prev, prevKey, prevFrom = bal, key, ""
		}
		return nil
	}
}

// buildNonNegativeBalance checks that the running balance never goes below zero: from the last
// committed row's balance (0 when the ledger is empty), the sum of the new rows' amounts, taken
// in key order, must stay >= 0 after every row. The running balance is computed from the
// amounts, never read from the balance field, so a wrong balance (balance_chain's concern) cannot
// hide a negative one. It reports the first row that takes the balance below zero.
func buildNonNegativeBalance(ps *params) checkFunc {
	ledgerTable := ps.str("ledger_table")
	amountField := ps.str("amount_field")
	balanceField := ps.str("balance_field")
	return func(p *pass) error {
		t := p.changes(ledgerTable)
		if t == nil || len(t.Inserted) == 0 {
			return nil
		}
		rows := slices.SortedFunc(slices.Values(t.Inserted), func(a, b table.Row) int { return table.CompareKeys(a[t.Key], b[t.Key]) })
		last, ok, err := p.lastCommitted(ledgerTable)
		if err != nil {
			return err
		}
		running := 0.0
		if ok {
			b, isNum := toFloat(last[balanceField])
			if !isNum {
				return fmt.Errorf("committed %s row %s has %s %s, not a number", ledgerTable, table.FormatValue(last[t.Key]), balanceField, table.FormatValue(last[balanceField]))
			}
			running = b
		}
		for _, r := range rows {
			amount, isNum := toFloat(r[amountField])
			if !isNum {
				continue // ledger_per_item and the schema report it
			}
			before := running
			running += amount
			if math.Round(running*100) < 0 { // below zero by at least half a cent: not float noise
				p.reportf(CodeBalanceNegative,
					"write nothing the balance cannot cover and set STATUS to say why",
					"new %s row %s (%s %s) takes the balance from %s to %s; it must stay >= 0",
					ledgerTable, table.FormatValue(r[t.Key]), amountField, money(amount), money(before), money(running))
				return nil
			}
		}
		return nil
	}
}
