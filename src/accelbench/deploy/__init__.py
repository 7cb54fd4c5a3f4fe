"""Deployment: installing engines, preparing models and starting engine servers on a target.

- ``engines``: isolated virtual environments for serving engines (vLLM CPU, llama.cpp), one per version.
- ``model_store``: models prepared for those engines (a Hugging Face directory and/or a GGUF file), cached.
- ``base``: the ``Target`` interface (deploy, wait_ready, logs, teardown) and the ``TARGETS`` registry.
- ``local``: the engine server as a child process on this machine; ``endpoint``: a server already running.
- ``proctree``: stopping an engine's whole process tree, also when accelbench itself is killed outright.
"""

from accelbench.deploy.target import TARGETS, DeployedEngine, Target, make_target

__all__ = ["TARGETS", "DeployedEngine", "Target", "make_target"]
