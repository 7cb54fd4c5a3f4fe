"""The load patterns a benchmark sends its measured requests by, one module each:

- ``closed_loop``: a fixed number of workers, each sending the next request as soon as it is free (an infinite
  rate at ``max_concurrency``), started one by one over a ramp when ``ramp_up_s`` is set;
- ``arrivals``: every request released at its planned time (a request rate with Poisson/gamma arrivals, a rate
  load plan, or a trace's own send times), a semaphore bounding concurrency;
- ``staged``: a load plan of concurrency stages, sending while fewer requests are in flight than the plan allows;
- ``conversations``: multi-turn conversations with think time between turns;
- ``warmup``: the warmup requests sent before the clock starts.

Each takes a ``sending.Sending`` (the client, the feed of ready requests, the collector, the stop flag and the
clock's start) and records every request it sends in the collector.
"""
