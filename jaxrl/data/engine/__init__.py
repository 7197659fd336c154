"""The data engine: generated KernelBench-format tasks, teacher solutions, verification and splits.

Text work only (no torch, no jax): references are written as source text; running them goes through the
sandbox service.

    from jaxrl.data.engine import generate_tasks, Decontaminator, SplitPlan, generate_split
    tasks = generate_tasks(seed=0, count=100, scale="cpu")      # round-robin over every family
    kept, dropped = Decontaminator(kernelbench_sources).split(tasks)
    train = generate_split(SplitPlan(), "train", seed=0, count=1000)
"""

from jaxrl.data.engine.decontam import DecontamMatch, DecontamReport, Decontaminator, input_specs, normalized_ast_hash
from jaxrl.data.engine.families import FamilyInfo
from jaxrl.data.engine.generator import generate_task, generate_tasks, list_families
from jaxrl.data.engine.signature import op_signature
from jaxrl.data.engine.splits import PARTS, SplitPlan, generate_split, split_tasks
from jaxrl.data.engine.tasks import GeneratedTask, TeacherSolution

__all__ = [
    "PARTS", "DecontamMatch", "DecontamReport", "Decontaminator", "FamilyInfo", "GeneratedTask", "SplitPlan",
    "TeacherSolution", "generate_split", "generate_task", "generate_tasks", "input_specs", "list_families",
    "normalized_ast_hash", "op_signature", "split_tasks",
]
