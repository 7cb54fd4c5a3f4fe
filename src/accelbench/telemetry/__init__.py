"""What the machine and the server said while a run happened: host environment (``host``), the server's
Prometheus metrics, and which CPU kernels ran."""
