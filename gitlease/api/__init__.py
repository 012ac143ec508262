"""The public Python API over the engine: lease calls, the Lease handle, bundles, reads, guarded
operations."""
