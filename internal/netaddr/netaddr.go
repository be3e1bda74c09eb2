// Package netaddr answers questions about network addresses that several
// Setpoint binaries and the Go client ask alike.
package netaddr

import "net"

// Loopback reports whether addr is host:port with a loopback host: a
// loopback IP address or "localhost".
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && LoopbackHost(host)
}

// LoopbackHost reports whether host is a loopback IP address or
// "localhost".
func LoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
