"""Knowledge-graph retrieval for KAG setups (see ``base`` for the contract)."""
