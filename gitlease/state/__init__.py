"""What a host keeps beside the refs in the store's worklease/ folder: guards, high-water marks,
prune floors, the wait queue, the keepalive registry, the verified-records cache, the auto-prune
stamp."""
