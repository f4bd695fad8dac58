// Command starplan runs model-written plans safely against an embedded inventory database.
// See the README for a tour; `starplan --help` lists the commands.
package main

import (
	"os"

	"github.com/starplan/starplan/internal/cli"
)

func main() { os.Exit(cli.Command(os.Args[1:])) }
