// Package interrupt runs the built kubectl-rebalance against servers that
// really hang - a TCP listener that never answers, a TLS handshake that
// never finishes, an answer whose body never comes - and stops it with a
// real SIGINT or SIGTERM, or lets --timeout run out. Its tests own one
// thing: that every command ends within a bound however the server hangs.
// They need no control plane.
package interrupt
