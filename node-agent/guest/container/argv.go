package container

import (
	"fmt"
	"strings"
)

// splitArgs splits a command line into argv the way a POSIX shell splits words, without
// expansions: blanks separate words; 'single quotes' keep everything literally; "double
// quotes" keep everything but \" \\ \$ \` (the backslash escapes them); outside quotes a
// backslash escapes the next character. So Spec.Cmdline `/bin/sh -c 'echo hi; sleep 1'`
// is ["/bin/sh", "-c", "echo hi; sleep 1"].
func splitArgs(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			inWord = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("command line %q: unterminated single quote", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inWord = true
			i++
			for ; ; i++ {
				if i >= len(s) {
					return nil, fmt.Errorf("command line %q: unterminated double quote", s)
				}
				if s[i] == '"' {
					break
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
		case c == '\\':
			inWord = true
			if i+1 >= len(s) {
				return nil, fmt.Errorf("command line %q: trailing backslash", s)
			}
			i++
			if s[i] != '\n' {
				cur.WriteByte(s[i])
			}
		default:
			inWord = true
			cur.WriteByte(c)
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}
