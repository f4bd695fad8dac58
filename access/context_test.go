package access

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestContextCarriesThePrincipal(t *testing.T) {
	_, ok := FromContext(context.Background())
	assert.False(t, ok, "a context without a principal says so")
	p := Principal{Name: "agent-1", Role: Proposer}
	got, ok := FromContext(NewContext(context.Background(), p))
	assert.True(t, ok)
	assert.Equal(t, p, got)
}
