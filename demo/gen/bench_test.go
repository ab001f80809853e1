package gen

import (
	"io"
	"testing"
)

func BenchmarkGenerate200k(b *testing.B) {
	for b.Loop() {
		if _, err := Generate(Config{Events: 200_000, Seed: 1, End: testEnd}, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
