package events

// Halt stops m's heartbeat without withdrawing it, as a crash would.
func Halt(m *Members) {
	m.stop()
	<-m.done
}
