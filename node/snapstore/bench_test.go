package snapstore

func cleanBenchFixtures() {}
