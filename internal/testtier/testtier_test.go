package testtier

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSizeFollowsTheTier(t *testing.T) {
	t.Setenv(Env, "")
	assert.False(t, Long())
	assert.Equal(t, 20, Size(20, 200))
	t.Setenv(Env, "1")
	assert.True(t, Long())
	assert.Equal(t, 200, Size(20, 200))
}
