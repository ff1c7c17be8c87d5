package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/axsched/ax/contracts/client"
)

// apiFlags are the flags every API-backed command group shares.
type apiFlags struct {
	api    string
	output string
}

func (f *apiFlags) register(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&f.api, "api", envStr("AX_API", defaultAPI), "submitter base URL [AX_API]")
	cmd.PersistentFlags().StringVarP(&f.output, "output", "o", "text", "text or json")
}

func (f *apiFlags) client() *client.Client { return client.New(f.api) }

// print writes v as indented JSON with -o json, or calls text.
func (f *apiFlags) print(w io.Writer, v any, text func()) error {
	switch f.output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "text":
		text()
		return nil
	default:
		return fmt.Errorf("--output %q: want text or json", f.output)
	}
}
