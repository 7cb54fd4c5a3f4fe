"""From one benchmark to a fleet: traffic per interval in (``traffic``), servers per interval and their cost out
(``sizing``), cold starts priced in (``cold_start``), the ranked answer (``result``). Pure arithmetic on plain
data: one server's capacity is handed in by ``services/fleet_plan.py``, which reads the store and asks the planner."""
