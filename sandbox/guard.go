package sandbox

import "github.com/starplan/starplan/builtins"

// reservedPrefix starts every name the sandbox adds to a program; plans may not use it.
const reservedPrefix = builtins.GuardPrefix

// guardTree rewrites a checked program so that its amplifying operations call the guards; the
// guards own their rewrite (builtins.GuardTree; the check's walk has gathered what it needs).
var guardTree = builtins.GuardTreeSeen
