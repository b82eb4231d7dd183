"""Gold: silver rows -> history (generations, KIP-848 ownership, rebalances, movements, frequency) and
metrics (lag in offsets and seconds, Burrow-style status, daily summaries). DataFrame -> DataFrame only."""
