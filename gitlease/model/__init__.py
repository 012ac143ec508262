"""The claim and its truth on this host: the signed record, resource names and their refs, the
boot clock and durations, the claim judged from a record (active, expired, released, free,
invalid), records written on another boot clock, and when this host first saw another host's
record (sightings)."""
