package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/axsched/ax/contracts/client"
)

// apiFlags are the flags every API-backed command group shares.
type apiFlags struct {
	api       string
	output    string
	tokenFile string
	token     string
}

func (f *apiFlags) register(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&f.api, "api", envStr("AX_API", defaultAPI), "submitter base URL [AX_API]")
	cmd.PersistentFlags().StringVarP(&f.output, "output", "o", "text", "text or json")
	cmd.PersistentFlags().StringVar(&f.tokenFile, "token-file", envStr("AX_TOKEN_FILE", ""), "file holding the API key's token; else AX_TOKEN [AX_TOKEN_FILE]")
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error {
		// Checked before any API call, so a bad -o never follows a change.
		if err := f.validateOutput(); err != nil {
			return err
		}
		tok, err := readToken(f.tokenFile)
		f.token = tok
		return err
	}
}

// readToken reads the API token from file, or from AX_TOKEN; never from a
// flag value, which would show in process listings. No token is fine: a
// server on loopback with no key needs none.
func readToken(file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("token file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return os.Getenv("AX_TOKEN"), nil
}

func (f *apiFlags) client() *client.Client { return client.New(f.api, client.WithToken(f.token)) }

// validateOutput checks -o: text or json, as on every command (table, the
// old name of bench's text, is taken as text).
func (f *apiFlags) validateOutput() error {
	switch f.output {
	case "text", "json":
		return nil
	case "table":
		f.output = "text"
		return nil
	}
	return fmt.Errorf("--output %q: want text or json", f.output)
}

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
