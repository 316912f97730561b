package config_test

import (
	"errors"
	"testing"

	"github.com/spf13/pflag"

	"github.com/dtq-io/dtq/cmd/dtq/internal/config"
)

// FuzzLoad feeds arbitrary text to every variable, from the environment and
// from the flag: Load must never panic, and any error must be a *config.Error
// naming the variable.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{"", "0", "-1", "1.5", "1e9", "abc", "true", "a:1,b:2", "redis://h:1/0", "1h", "NaN", "Inf", ":", ",,"} {
		f.Add(uint8(0), s, false)
	}
	names := config.Names()
	f.Fuzz(func(t *testing.T, idx uint8, value string, asFlag bool) {
		name := names[int(idx)%len(names)]
		fs := pflag.NewFlagSet("fuzz", pflag.ContinueOnError)
		config.RegisterFlags(fs)
		env := map[string]string{}
		if asFlag {
			flag := fs.Lookup(flagOf(name))
			if err := fs.Set(flag.Name, value); err != nil {
				t.Fatal(err)
			}
		} else {
			env[name] = value
		}
		c, err := config.Load(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if err != nil {
			var cerr *config.Error
			if !errors.As(err, &cerr) {
				t.Fatalf("%s=%q: error %T is not a *config.Error", name, value, err)
			}
			return
		}
		if c.HeartbeatInterval*3 > c.VisibilityTimeout || c.RetryMaxDelay < c.RetryBaseDelay {
			t.Fatalf("%s=%q: cross-field rules not applied", name, value)
		}
		_ = c.ClientConfig()
		_ = c.Keys()
	})
}

func flagOf(name string) string {
	b := []byte(name[len("DTQ_"):])
	for i, c := range b {
		switch {
		case c == '_':
			b[i] = '-'
		case c >= 'A' && c <= 'Z':
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
