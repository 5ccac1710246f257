// Command contextd is a persistent context store for LLM agents. It only
// wires the command line; everything else lives under internal/.
package main

import (
	"context"
	"os"

	"github.com/contextd/contextd/internal/cli"
)

func main() {
	os.Exit(cli.Execute(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
