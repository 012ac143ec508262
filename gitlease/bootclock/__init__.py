"""Whose boot clock a record was written on: this host's, or a foreign one under one boot id.

A kernel boot id names a boot, not a clock: a time namespace (``unshare --time``, and
the CRIU, podman and LXC restores that use one) runs ``CLOCK_BOOTTIME`` at an offset
under the same boot id, and VM clones restored from one memory snapshot share a boot
id with boot clocks days apart. A record written on such a clock is judged like
another host's (by sightings, docs/remote.md), never on this clock.
"""
