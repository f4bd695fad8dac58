package cli

import (
	"runtime/debug"
	"strings"
)

// version describes this build for --version: the module version (a tag when installed with
// `go install …@vX`, "(devel)" from a checkout), the commit and its time when built from a
// repository (with "+dirty" for uncommitted changes), and the Go version.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (built without module information)"
	}
	return describeBuild(info)
}

func describeBuild(info *debug.BuildInfo) string {
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	parts := []string{v}
	if rev := settings["vcs.revision"]; rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if settings["vcs.modified"] == "true" {
			rev += "+dirty"
		}
		commit := "commit " + rev
		if t := settings["vcs.time"]; t != "" {
			commit += " of " + t
		}
		parts = append(parts, commit)
	}
	parts = append(parts, info.GoVersion)
	return strings.Join(parts, ", ")
}
