package discord

// Connected reports whether the gateway connection is up: Run is running
// and discordgo sent its last heartbeat. Readiness checks and the
// dashboard use it; while discordgo reconnects it is false.
func (a *Adapter) Connected() bool {
	if !a.running.Load() {
		return false
	}
	a.s.RLock()
	defer a.s.RUnlock()
	return a.s.DataReady
}

// Standby reports whether Run is waiting for a gateway shard that another
// replica serves (ClaimShard): the adapter can send, and takes a shard over
// once one is free. Readiness counts it as ready.
func (a *Adapter) Standby() bool {
	return a.active.Load() && !a.running.Load()
}
