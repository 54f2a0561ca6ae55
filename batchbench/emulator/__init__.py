"""A loopback OpenAI Batch API for tests, demos and rehearsals.

It is a stand-in for a service we do not control, so it shares no code with
the pipeline: a shared helper would let one bug hide on both sides.

    from batchbench.emulator import Emulator
    with Emulator(latency=0.05) as emu:
        client = openai.OpenAI(api_key="test", base_url=emu.base_url)
"""

from .model import judge_matches, load_responder
from .server import Faults
from .service import Emulator, serve

__all__ = ["Emulator", "Faults", "judge_matches", "load_responder", "serve"]
