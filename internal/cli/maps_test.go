package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/starplan/starplan/engine"
)

// shopDomain is the test domain of typed maps: users' payment methods by id, products' variants
// by item id.
const shopDomain = "../../testdata/domains/shop"

// refundPlan refunds 10.0 to Ada's gift card gc_1, adds a gift card and removes her credit card,
// reading the map as a plan does (a where path into it, items(), a float read back as a float).
const refundPlan = `
user = users_tbl.get({"payment_methods.*.source": "gift_card", "name": "Ada Lovelace"})
pms = user["payment_methods"]
total = 0.0
for pm_id, pm in pms.items():
    if pm["source"] == "gift_card":
        total += pm["balance"]
pms["gc_1"]["balance"] = pms["gc_1"]["balance"] + 10.0
pms["gc_1"]["refunds"].append(10.0)
pms["gc_3"] = {"source": "gift_card", "balance": 25}
pms.pop("cc_visa_1")
users_tbl.update({"payment_methods": pms}, user)
STATUS = "success"
answer_text = "Gift cards held " + str(total) + ", gc_2 holds " + repr(pms["gc_2"]["balance"]) + "."
`

// A typed map round-trips through seed, a plan's reads and writes, the diff, dump, export and
// import with its floats intact (57.0 stays 57.0, an int given for a float becomes one).
func TestTypedMapRoundTrip(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	o := s.run(false, "", "db", "init", "--domain", shopDomain)
	require.Equal(t, ExitOK, o.code, o.err)

	o = s.run(true, "y\n", "exec", writeFile(t, "refund.star", refundPlan))
	require.Equal(t, ExitOK, o.code, o.err+o.out)
	assert.Contains(t, o.out, "Gift cards held 157.0, gc_2 holds 100.0.", "the seed's 100 is a float in the plan")
	for _, want := range []string{
		"payment_methods.cc_visa_1: {'last4': '4242', 'source': 'credit_card'} →",
		"payment_methods.gc_1.balance: 57.0 → 67.0",
		"payment_methods.gc_1.refunds[2]: (absent) → 10.0",
		"payment_methods.gc_3: (absent) → {'balance': 25.0, 'source': 'gift_card'}",
	} {
		assert.Contains(t, o.out, want, "the diff is by key, floats as floats")
	}
	assert.Contains(t, o.out, "Applied run r_")

	const wantUser = `"payment_methods": {"gc_1":{"balance":67.0,"refunds":[10.0,2.5,10.0],"source":"gift_card"},"gc_2":{"balance":100.0,"source":"gift_card"},"gc_3":{"balance":25.0,"source":"gift_card"}}, "credit": {"EUR":0.5,"USD":1031.0}`
	dump := s.run(false, "", "db", "dump", "--json")
	require.Equal(t, ExitOK, dump.code, dump.err)
	assert.Contains(t, dump.out, wantUser)
	assert.Contains(t, dump.out, `"price_history": [{"1000000001":75.0,"1000000002":50.0},{}]`)
	text := s.run(false, "", "db", "dump")
	require.Equal(t, ExitOK, text.code, text.err)
	assert.Contains(t, text.out, "{'EUR': 0.5, 'USD': 1031.0}", "the people's dump shows a map as a plan writes it")

	for _, format := range []string{"json", "csv"} {
		t.Run(format, func(t *testing.T) {
			into := newSession(t)
			o := into.run(false, "", "db", "init", "--domain", shopDomain, "--empty")
			require.Equal(t, ExitOK, o.code, o.err)
			for _, name := range []string{"users", "products"} {
				exported := s.run(false, "", "db", "export", name, "--format", format)
				require.Equal(t, ExitOK, exported.code, exported.err)
				o = into.run(false, "", "db", "import", name, writeFile(t, name+"."+format, exported.out))
				require.Equal(t, ExitOK, o.code, o.err)
			}
			again := into.run(false, "", "db", "dump", "--json")
			require.Equal(t, ExitOK, again.code, again.err)
			assert.Equal(t, dump.out, again.out, "the imported store dumps as the exported one")
		})
	}
}

// A plan that writes a wrong kind into a map, or a key the map's pattern refuses, is told the
// entry's path and the rule; where paths into a map are checked against its declared values.
func TestTypedMapRefusals(t *testing.T) {
	t.Parallel()
	s := newSession(t)
	require.Equal(t, ExitOK, s.run(false, "", "db", "init", "--domain", shopDomain).code)
	for plan, want := range map[string]string{
		`u = users_tbl.get_by_key("U1")
pms = u["payment_methods"]
pms["gc_1"]["balance"] = "67.00"
users_tbl.update({"payment_methods": pms}, u)
STATUS = "success"
answer_text = "Done."`: `field "payment_methods.gc_1.balance" = "67.00" must be a number >= 0`,
		`u = users_tbl.get_by_key("U1")
pms = u["payment_methods"]
pms["giftcard"] = {"source": "gift_card", "balance": 1.0}
users_tbl.update({"payment_methods": pms}, u)
STATUS = "success"
answer_text = "Done."`: `field "payment_methods.giftcard" = "giftcard" cannot be a key: keys here must match the pattern (gc|cc|pp)_[0-9a-z_]+ (keys.pattern)`,
		`u = users_tbl.get({"payment_methods.*.sorce": "gift_card"})
STATUS = "success"
answer_text = "Done."`: `"sorce" is not among the keys of payment_methods.*`,
	} {
		o := s.run(false, "", "exec", "--json", writeFile(t, "bad.star", plan))
		assert.NotEqual(t, ExitOK, o.code, plan)
		var res engine.Result
		require.NoError(t, json.Unmarshal([]byte(o.out), &res), o.out)
		assert.False(t, res.Applied)
		require.Len(t, res.Diagnostics, 1, plan)
		assert.Contains(t, res.Diagnostics[0].Message, want, plan)
		assert.NotContains(t, res.Diagnostics[0].Hint, "row.get", "no hint about a missing dict key")
	}
	dump := s.run(false, "", "db", "dump", "--json")
	assert.True(t, strings.Contains(dump.out, `"gc_1":{"balance":57.0,`), "nothing was written")
}
