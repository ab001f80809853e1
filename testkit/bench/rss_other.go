//go:build !unix

package bench

// selfCPU is not measured on this platform.
func selfCPU() float64 { return 0 }
