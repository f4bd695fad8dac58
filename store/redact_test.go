package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Every secret a connection string may carry is hidden, in URLs and key=value strings alike
// (review: sslpassword reached the error and its hint in clear).
func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"./shop":                      "./shop",
		"/var/lib/starplan":           "/var/lib/starplan",
		"postgres://ann:pw@h/db":      "postgres://ann:xxxxx@h/db",
		"postgres://h/db?password=pw": "postgres://h/db?password=xxxxx",
		"postgres://127.0.0.1:1/db?sslpassword=TopSecretKeyPW&sslmode=bogus": "postgres://127.0.0.1:1/db?sslmode=bogus&sslpassword=xxxxx",
		"postgres://h/db?auth_token=abc":                                     "postgres://h/db?auth_token=xxxxx",
		"postgres://h/%zz":                                                   "postgres://…",
		"host=h password=pw dbname=d":                                        "host=h password=xxxxx dbname=d",
		"host=h sslpassword = 'a b\\' c' user=u":                             "host=h sslpassword = xxxxx user=u",
		"host=h user=u client_secret=s3":                                     "host=h user=u client_secret=xxxxx",
	} {
		assert.Equal(t, want, Redact(in), in)
	}
}
