package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/internal/screen"
)

// newScreenCmd is the demo's view of a VM's screen and its hands on the keyboard, through
// QEMU's human monitor (HMP, -monitor unix:SOCK,server=on): a screendump as PNG and how
// many colours it has (a text console has a handful, a graphical greeter or desktop
// many), how many pixels two screendumps differ in, which field of the greeter has the
// keyboard focus, and keys typed one at a time (text, or keys by name).
func newScreenCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "screen",
		Short: "A QEMU VM's screen and keyboard through its human monitor (demo): dump, changed, focus, type, key",
	}
	var monitor string
	var limit int
	dump := &cobra.Command{
		Use:   "dump FILE",
		Short: "Write the VM's screen to FILE (PNG) and print its number of distinct colours (up to --limit)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_ = os.Remove(args[0]) // a stale picture must not pass for the new one
			if _, err := hmp(monitor, "screendump "+args[0]+" -f png"); err != nil {
				return err
			}
			img, err := screen.Load(args[0])
			if err != nil {
				return err
			}
			fmt.Println(screen.Colours(img, limit))
			return nil
		},
	}
	dump.Flags().StringVar(&monitor, "monitor", "", "the VM's human monitor socket")
	dump.Flags().IntVar(&limit, "limit", 256, "count colours up to this many")
	_ = dump.MarkFlagRequired("monitor")

	changed := &cobra.Command{
		Use:   "changed A.png B.png",
		Short: "Print how many pixels differ between two screendumps",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := screen.Load(args[0])
			if err != nil {
				return err
			}
			b, err := screen.Load(args[1])
			if err != nil {
				return err
			}
			fmt.Println(screen.Changed(a, b))
			return nil
		},
	}

	var typeMonitor string
	var pause time.Duration
	var enter bool
	typ := &cobra.Command{
		Use:   "type TEXT",
		Short: "Type TEXT on the VM's keyboard (US layout), one key at a time",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			text := args[0]
			if enter {
				text += "\n"
			}
			var keys []string
			for _, r := range text {
				k, shift, ok := screen.KeyOf(r)
				if !ok {
					return fmt.Errorf("no key for %q on a US keyboard", r)
				}
				if shift {
					k = "shift-" + k
				}
				keys = append(keys, k)
			}
			for _, k := range keys {
				if _, err := hmp(typeMonitor, "sendkey "+k); err != nil {
					return err
				}
				// A graphical toolkit under TCG drops keys that arrive in one burst.
				time.Sleep(pause)
			}
			return nil
		},
	}
	typ.Flags().StringVar(&typeMonitor, "monitor", "", "the VM's human monitor socket")
	typ.Flags().DurationVar(&pause, "pause", 150*time.Millisecond, "pause after each key")
	typ.Flags().BoolVar(&enter, "enter", false, "press Return after the text")
	_ = typ.MarkFlagRequired("monitor")

	var keyMonitor string
	key := &cobra.Command{
		Use:   "key KEYS...",
		Short: "Press keys as the human monitor's sendkey names them, one after the other (ctrl-a, backspace, ret, shift)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, k := range args {
				if _, err := hmp(keyMonitor, "sendkey "+k); err != nil {
					return err
				}
				time.Sleep(pause)
			}
			return nil
		},
	}
	key.Flags().StringVar(&keyMonitor, "monitor", "", "the VM's human monitor socket")
	_ = key.MarkFlagRequired("monitor")

	focus := &cobra.Command{
		Use:   "focus FILE.png",
		Short: "Print which field of LightDM's greeter has the keyboard focus in a screendump: name, password or none",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			img, err := screen.Load(args[0])
			if err != nil {
				return err
			}
			fmt.Println(screen.GreeterFocus(img))
			return nil
		},
	}

	c.AddCommand(dump, changed, typ, key, focus)
	return c
}

// hmpPrompt ends every answer of the human monitor.
const hmpPrompt = "(qemu) "

// hmp runs one command on QEMU's human monitor at socket and returns what it printed. The
// monitor answers once the command is done (a screendump's file is written).
func hmp(socket, cmdline string) (string, error) {
	c, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	read := func() (string, error) {
		var buf bytes.Buffer
		b := make([]byte, 4096)
		for !strings.HasSuffix(buf.String(), hmpPrompt) {
			n, err := c.Read(b)
			buf.Write(b[:n])
			if err != nil {
				return buf.String(), fmt.Errorf("monitor %s: %w", socket, err)
			}
		}
		return buf.String(), nil
	}
	if _, err := read(); err != nil { // the greeting
		return "", err
	}
	if _, err := fmt.Fprintf(c, "%s\n", cmdline); err != nil {
		return "", err
	}
	out, err := read()
	if err != nil {
		return "", err
	}
	// The answer echoes the command line (with terminal control sequences) before the
	// output; the output's last line before the prompt says what went wrong, if anything.
	out = strings.TrimSuffix(out, hmpPrompt)
	if i := strings.Index(out, "\r\n"); i >= 0 {
		out = out[i+2:]
	}
	out = strings.TrimSpace(out)
	if out != "" && !strings.HasPrefix(cmdline, "info ") {
		return out, errors.New("monitor: " + cmdline + ": " + out)
	}
	return out, nil
}
