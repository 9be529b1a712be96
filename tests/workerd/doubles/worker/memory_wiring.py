"""Double of `worker.memory_wiring`: installing the memory tools imports the semantic memory
(pydantic), which cannot load here. The DO core double runs no turn, so nothing is wired."""


def install_memory_tools() -> None:
    """Nothing to install: the core double has no agent loop."""
