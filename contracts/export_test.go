package contracts

// KindRefersTo reports whether CheckSchema knows what the parameter of a kind names.
func KindRefersTo(kind, param string) bool {
	_, ok := refs[kind][param]
	return ok
}
