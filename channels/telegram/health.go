package telegram

// Connected reports whether the adapter is receiving: Run is running and
// the last getUpdates did not fail (a long poll in progress counts as
// connected). Readiness checks and the dashboard use it.
func (a *Adapter) Connected() bool {
	return a.running.Load() && !a.pollFailing.Load()
}
