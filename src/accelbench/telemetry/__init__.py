"""What the machine and the server said while a run happened: host environment (``host``), the server's
Prometheus metrics, what the devices did (``devices``: CPU, NVIDIA GPUs, AWS Neuron) and which CPU kernels ran."""
