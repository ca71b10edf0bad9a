"""The runtime revision controller's I/O: informers, queue, cache reads and writes."""
