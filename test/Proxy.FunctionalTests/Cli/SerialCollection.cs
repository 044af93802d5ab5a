namespace Proxy.FunctionalTests.Cli;

/// <summary>
/// Runs its classes alone, after the parallel ones: h2load saturates both cores, and h2spec's verdicts can
/// depend on timing (see the NOTE in <see cref="Hosting.HelloAppFixture"/>), so neither should share the
/// machine with the rest of the suite.
/// </summary>
[CollectionDefinition(Name, DisableParallelization = true)]
public sealed class SerialCollection
{
    public const string Name = "Serial (timing-sensitive peers)";
}
