package cmd

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"
	"k8s.io/cli-runtime/pkg/resource"
)

// The files given with -f are judged before the API server is asked
// anything, as kubectl does: a missing file, a file that is not YAML or
// JSON, an object without a kind, and files or standard input that hold no
// object each get their own error even when no server can be reached,
// instead of a discovery error that hides them.

// decodeStdin turns standard input into UTF-8 as cli-runtime does with the
// files it reads: a byte order mark selects UTF-16 (little or big endian)
// or UTF-8, and is dropped; text without one is taken as UTF-8.
func decodeStdin(data []byte) ([]byte, error) {
	decoded, _, err := transform.Bytes(unicode.BOMOverride(unicode.UTF8.NewDecoder()), data)
	return decoded, err
}

// readsStdin reports whether -f - was given.
func (o *targetOptions) readsStdin() bool { return slices.Contains(o.Filenames, "-") }

// isURL tells a -f URL, which is read from the network, from a local path.
func isURL(name string) bool {
	return strings.HasPrefix(name, "http://") || strings.HasPrefix(name, "https://")
}

// judgeLocalInput reads standard input (once, into o.stdin, for the
// resolver to read again) and decodes every local -f file and standard
// input without a server, with cli-runtime's own readers. It returns the
// error the user should see first, nil when the input can be resolved.
// -f URLs and -k are left to the resolver.
func (o *targetOptions) judgeLocalInput() error {
	if len(o.Filenames) == 0 {
		return nil
	}
	if o.readsStdin() && o.stdin == nil {
		data, err := io.ReadAll(os.Stdin)
		if err != nil {
			return fmt.Errorf("cannot read standard input given with -f -: %v", err)
		}
		if o.stdin, err = decodeStdin(data); err != nil {
			return fmt.Errorf("cannot decode standard input given with -f -: %v", err)
		}
	}
	builder := resource.NewLocalBuilder().Unstructured().Flatten()
	remote, local := o.Kustomize != "", 0
	for _, name := range o.Filenames {
		if isURL(name) {
			remote = true
			continue
		}
		builder = o.addFilename(builder, name)
		local++
	}
	if local == 0 {
		return nil
	}
	objects := 0
	err := builder.Do().Visit(func(_ *resource.Info, err error) error {
		if err == nil {
			objects++
		}
		return err
	})
	if err != nil {
		return o.inputError(err)
	}
	if objects == 0 && !remote {
		return fmt.Errorf("%s holds no object: give a manifest of a workload, a List of them or a WorkloadRebalancer; nothing was done", o.inputNames())
	}
	return nil
}

// addFilename adds one -f value to builder: standard input from what was
// read of it, a file or directory as cli-runtime reads it.
func (o *targetOptions) addFilename(builder *resource.Builder, name string) *resource.Builder {
	if name == "-" {
		return builder.Stream(bytes.NewReader(o.stdin), "standard input")
	}
	return builder.FilenameParam(o.EnforceNamespace, &resource.FilenameOptions{Filenames: []string{name}, Recursive: o.Recursive})
}

// filenameParams adds the -f and -k values to the resolver's builder. With
// -f -, standard input is what judgeLocalInput read of it, so that it can
// be resolved again after a passing fault; the values keep their order.
func (o *targetOptions) filenameParams(builder *resource.Builder) *resource.Builder {
	if !o.readsStdin() || o.stdin == nil || o.Kustomize != "" {
		return builder.FilenameParam(o.EnforceNamespace, &o.FilenameOptions)
	}
	for _, name := range o.Filenames {
		builder = o.addFilename(builder, name)
	}
	return builder
}
