package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
)

// floodChunk is what flood writes at a time: failer itself stays small
// however much it prints.
const floodChunk = 64 << 10

// stderrNoise is the line floodStderr repeats for verb.
func stderrNoise(verb string) string { return "failer " + verb + " stderr noise\n" }

// padding is the padError filler appended to an injected error's message.
func (c *NetConf) padding() string {
	if c.PadError <= 0 {
		return ""
	}
	return strings.Repeat("x", int(c.PadError))
}

// flood writes floodStdout spaces to stdout and floodStderr bytes of noise
// lines naming verb to stderr, in chunks.
func (c *NetConf) flood(verb string, stdout, stderr io.Writer) error {
	if err := repeatTo(stdout, " ", c.FloodStdout); err != nil {
		return fmt.Errorf("failer: floodStdout: %w", err)
	}
	if err := repeatTo(stderr, stderrNoise(verb), c.FloodStderr); err != nil {
		return fmt.Errorf("failer: floodStderr: %w", err)
	}
	return nil
}

// repeatTo writes n bytes of unit repeated (the last one cut short) to w.
func repeatTo(w io.Writer, unit string, n int64) error {
	if n <= 0 {
		return nil
	}
	// Whole units, so that the pattern runs on across chunks.
	chunk := bytes.Repeat([]byte(unit), max(floodChunk/len(unit), 1))
	for n > 0 {
		k := min(n, int64(len(chunk)))
		if _, err := w.Write(chunk[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}
