package access

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRoleRights(t *testing.T) {
	want := map[Role][]Right{
		Proposer: {Read, Propose},
		Approver: {Read, Propose, Approve},
		Admin:    {Read, Propose, Approve, Administer},
		"":       {},
		"root":   {},
	}
	for role, rights := range want {
		for _, x := range []Right{Read, Propose, Approve, Administer} {
			assert.Equal(t, assert.ObjectsAreEqual(true, contains(rights, x)), role.Can(x), "%q can %q", role, x)
		}
	}
}

func contains(rs []Right, x Right) bool {
	for _, r := range rs {
		if r == x {
			return true
		}
	}
	return false
}

func TestParseRole(t *testing.T) {
	for _, r := range Roles {
		got, err := ParseRole(string(r))
		require.NoError(t, err)
		assert.Equal(t, r, got)
	}
	_, err := ParseRole("owner")
	assert.ErrorContains(t, err, "proposer, approver, admin")
}

func TestLocal(t *testing.T) {
	p := Local()
	assert.True(t, p.IsLocal())
	assert.Equal(t, Admin, p.Role)
	assert.False(t, Principal{Name: "agent", Role: Proposer}.IsLocal())
}
