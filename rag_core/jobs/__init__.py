"""Background jobs: a procrastinate queue on the store's database, our progress records, the workers."""
