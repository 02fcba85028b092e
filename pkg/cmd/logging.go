package cmd

import (
	goflag "flag"
	"io"
	"log/slog"
	"strconv"
	"sync"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	// Every kubeconfig kubectl accepts works here too: the auth-provider
	// plugins (oidc, and the gcp and azure stubs that explain their
	// replacement) register themselves with client-go. Exec credential
	// plugins are built into client-go.
	_ "k8s.io/client-go/plugin/pkg/client/auth"
)

// klogFlags holds klog's flags, which bind to klog's process-wide settings;
// they are registered once and shared by every command tree.
var (
	klogFlagsOnce sync.Once
	klogFlags     *goflag.FlagSet
)

func klogFlagSet() *goflag.FlagSet {
	klogFlagsOnce.Do(func() {
		klogFlags = goflag.NewFlagSet("klog", goflag.ContinueOnError)
		klog.InitFlags(klogFlags)
	})
	return klogFlags
}

// addLogFlags adds kubectl's -v/--v and --vmodule to flags. A new command
// tree starts at verbosity 0, whatever an earlier one in this process set.
func addLogFlags(flags *pflag.FlagSet) {
	fs := klogFlagSet()
	_ = fs.Set("v", "0")
	_ = fs.Set("vmodule", "")
	for _, name := range []string{"v", "vmodule"} {
		// pflag gives the one-letter "v" its shorthand, so -v=6 works as in kubectl.
		flags.AddGoFlag(fs.Lookup(name))
	}
	flags.Lookup("v").Usage = "Number for the log level verbosity: 6 shows every request to the API servers, 8 their bodies; " +
		"the client's logs go to stderr (in the daemon, into its structured logs)."
}

// verbosity is the value of -v.
func verbosity() int {
	v, err := strconv.Atoi(klogFlagSet().Lookup("v").Value.String())
	if err != nil {
		return 0
	}
	return v
}

// setupClientLogs decides where client-go's logs go for a one-shot command.
// At the default verbosity they are dropped: every failure reaches the user
// once, as the command's own error, and not again as a client-go log line.
// With -v they go to errOut in klog's text format, as in kubectl.
func setupClientLogs(errOut io.Writer) {
	v := verbosity()
	if v <= 0 {
		klog.SetLogger(logr.Discard())
		return
	}
	config := textlogger.NewConfig(textlogger.Output(errOut), textlogger.Verbosity(v))
	_ = config.VModule().Set(klogFlagSet().Lookup("vmodule").Value.String())
	klog.SetLogger(textlogger.NewLogger(config))
}

// slogLevel is the slog level that lets klog's V(v) messages through: klog's
// verbosity n maps to slog level -n through logr's slog bridge.
func slogLevel(v int) slog.Level {
	if v <= 0 {
		return slog.LevelInfo
	}
	return slog.Level(-v)
}
