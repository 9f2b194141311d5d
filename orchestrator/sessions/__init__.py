"""Sessions in Redis: events, the store, leases and turns parked for a credential."""
