package pycompat

// foreignModules are Python modules a model reaches for that no plan can have, each with what a
// plan cannot do that the module would. One home for the hint that both a rejected import and an
// undefined name (os.listdir without the import) give.
var foreignModules = map[string]string{
	"os":              "plans cannot reach files, the environment or processes",
	"sys":             "plans cannot reach the interpreter or the process",
	"subprocess":      "plans cannot start processes",
	"multiprocessing": "plans cannot start processes",
	"threading":       "plans run on one thread, to the end, within their limits",
	"asyncio":         "plans run on one thread, to the end, within their limits",
	"io":              "plans cannot reach files",
	"pathlib":         "plans cannot reach files",
	"shutil":          "plans cannot reach files",
	"glob":            "plans cannot reach files",
	"tempfile":        "plans cannot reach files",
	"pickle":          "plans cannot reach files",
	"csv":             "plans cannot reach files; tables are read with the table helpers",
	"sqlite3":         "plans reach data only through the table helpers",
	"tinydb":          "plans reach data only through the table helpers",
	"requests":        "plans cannot reach the network",
	"urllib":          "plans cannot reach the network",
	"http":            "plans cannot reach the network",
	"socket":          "plans cannot reach the network",
	"time":            "plans cannot read the clock or sleep; use a domain helper for the time if the reference lists one",
	"datetime":        "plans cannot read the clock; use a domain helper for the time if the reference lists one, and format dates as text",
	"random":          "plans are deterministic: the same data gives the same plan result",
	"importlib":       "plans cannot load code",
	"builtins":        "plans cannot load code",
	"ctypes":          "plans cannot load code",
}

// ForeignModuleHint says why a Python module is not there in a plan ("there is no os module in
// plans; plans cannot reach files, …"), for the modules a model commonly reaches for; name may be
// dotted (os.path). It reports false for any other name.
func ForeignModuleHint(name string) (string, bool) {
	root := name
	for i := 0; i < len(name); i++ {
		if name[i] == '.' {
			root = name[:i]
			break
		}
	}
	why, ok := foreignModules[root]
	if !ok {
		return "", false
	}
	return "there is no " + root + " module in plans; " + why, true
}
