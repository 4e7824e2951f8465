"""Across-runs answers in the API: ``/api/v1/population/`` and ``…/compare/``.

Thin views over ``benchdb.results.population``: the distribution of per-run
figures and guest/host overheads for any run filter, and "setting A vs
setting B over the community's runs" with an effect, an interval, a count of
systems and a verdict.  Run filters are ``RunFilterSet``'s query parameters
(the same as ``/api/v1/runs/``); for a comparison the two settings are given
as query strings in ``a`` and ``b`` (``a=cache_mode%3Dnone``) and the other
parameters apply to both sides.
"""

from __future__ import annotations

from django.http import QueryDict
from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from benchdb.api.serializers import FreshnessSerializer, represent, validated
from benchdb.api.views import checked_filters, error_responses, filter_parameters
from benchdb.results import answer_cache, answers, population, stats
from benchdb.results.filters import RunFilterSet, problems
from benchdb.results.vocab import FACETS

# Parameters of these views that are not run filters.
OWN_PARAMS = (
    "test_id",
    "metric",
    "comparability_key",
    "a",
    "b",
    "of",
    "format",
    "facet",
    "values",
)


class PopulationQuerySerializer(serializers.Serializer):
    test_id = serializers.CharField(max_length=100)
    metric = serializers.ChoiceField(choices=list(population.METRICS), default="iops")
    comparability_key = serializers.CharField(max_length=300, required=False)


class PopulationCompareQuerySerializer(PopulationQuerySerializer):
    of = serializers.ChoiceField(
        choices=["figure", "overhead"],
        default="figure",
        help_text="figure: the runs' figures; overhead: their guest ÷ host.",
    )
    a = serializers.CharField(
        max_length=500,
        help_text="Setting A as run filters in a query string, e.g. cache_mode=none",
    )
    b = serializers.CharField(
        max_length=500,
        help_text="Setting B as run filters in a query string, e.g. "
        "cache_mode=writeback",
    )


class PopulationRankQuerySerializer(PopulationQuerySerializer):
    facet = serializers.ChoiceField(
        choices=sorted(FACETS), help_text="The setting whose values are ranked."
    )
    values = serializers.CharField(
        max_length=500,
        help_text="Comma-separated values of the facet, e.g. "
        "none,writethrough,writeback,directsync,unsafe",
    )

    def validate(self, data):
        choices = {v for v, _label in FACETS[data["facet"]].choices}
        values = [v.strip() for v in data["values"].split(",") if v.strip()]
        bad = [v for v in values if v not in choices]
        if bad:
            raise serializers.ValidationError(
                {"values": [f"not a {data['facet']}: {', '.join(bad)}"]}
            )
        if len(values) < 2 or len(set(values)) != len(values):
            raise serializers.ValidationError(
                {"values": ["at least two different values"]}
            )
        data["values"] = values
        return data


class SpreadSerializer(serializers.Serializer):
    """Median, quartiles and the median's bootstrap 95% interval."""

    runs = serializers.IntegerField()
    systems = serializers.IntegerField(help_text="Distinct hardware descriptions.")
    median = serializers.FloatField(allow_null=True)
    q1 = serializers.FloatField(allow_null=True)
    q3 = serializers.FloatField(allow_null=True)
    min = serializers.FloatField(allow_null=True)
    max = serializers.FloatField(allow_null=True)
    ci95_low = serializers.FloatField(allow_null=True)
    ci95_high = serializers.FloatField(allow_null=True)
    interval_method = serializers.CharField(
        allow_null=True,
        help_text="bootstrap (fixed seed), or order statistics above 1000 values.",
    )


class OverheadSpreadSerializer(SpreadSerializer):
    percent = serializers.FloatField(
        allow_null=True, help_text="(median guest ÷ host - 1) × 100."
    )


class PopulationSerializer(serializers.Serializer):
    test_id = serializers.CharField()
    metric = serializers.CharField()
    unit = serializers.CharField()
    higher_is_better = serializers.BooleanField(allow_null=True)
    comparability_key = serializers.CharField(allow_null=True)
    results = SpreadSerializer(help_text="Per-run figures (mean over repeats).")
    overhead = OverheadSpreadSerializer(
        help_text="Guest ÷ host per guest run with a visible host baseline."
    )
    freshness = FreshnessSerializer(allow_null=True)


class PerSystemSerializer(serializers.Serializer):
    q1 = serializers.FloatField()
    q3 = serializers.FloatField()
    min = serializers.FloatField()
    max = serializers.FloatField()


class WilcoxonSerializer(serializers.Serializer):
    statistic = serializers.FloatField(allow_null=True)
    p = serializers.FloatField(allow_null=True)
    method = serializers.CharField(allow_null=True)
    r_plus = serializers.FloatField(allow_null=True)
    r_minus = serializers.FloatField(allow_null=True)


class HodgesLehmannSerializer(serializers.Serializer):
    ratio = serializers.FloatField(help_text="B ÷ A: exp(median Walsh average).")
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)
    percent = serializers.FloatField()
    confidence = serializers.FloatField()


class ProbabilitiesSerializer(serializers.Serializer):
    b_better = serializers.FloatField()
    equivalent = serializers.FloatField(
        help_text="Within ±equivalence_percent (Bayesian signed-rank test)."
    )
    a_better = serializers.FloatField()


class AcrossSerializer(serializers.Serializer):
    """B vs A over the systems that measured both (results/across.py)."""

    systems = serializers.IntegerField()
    runs = serializers.IntegerField()
    minimum_systems = serializers.IntegerField()
    enough = serializers.BooleanField()
    systems_needed = serializers.IntegerField()
    b_wins = serializers.IntegerField()
    a_wins = serializers.IntegerField()
    ties = serializers.IntegerField()
    equivalence_percent = serializers.FloatField()
    wilcoxon = WilcoxonSerializer(allow_null=True)
    hodges_lehmann = HodgesLehmannSerializer(allow_null=True)
    probabilities = ProbabilitiesSerializer(allow_null=True)
    verdict = serializers.ChoiceField(choices=list(stats.VERDICTS))
    text = serializers.CharField()


class LeftOutSerializer(serializers.Serializer):
    systems_not_measuring_all = serializers.IntegerField(
        help_text="Systems that measured this setting but not every other."
    )
    their_runs = serializers.IntegerField()
    runs_without_system = serializers.IntegerField(
        help_text="Runs without a hardware description: never a system."
    )


class LeftOutPairSerializer(serializers.Serializer):
    a = LeftOutSerializer()
    b = LeftOutSerializer()


class PopulationCompareSerializer(serializers.Serializer):
    test_id = serializers.CharField()
    metric = serializers.CharField()
    unit = serializers.CharField()
    higher_is_better = serializers.BooleanField(allow_null=True)
    comparability_key = serializers.CharField(allow_null=True)
    of = serializers.ChoiceField(choices=["figure", "overhead"])
    a = SpreadSerializer()
    b = SpreadSerializer()
    paired = serializers.BooleanField(
        help_text="True: the effect is the median of per-system ratios over "
        "systems measured under both settings."
    )
    paired_systems = serializers.IntegerField()
    ratio = serializers.FloatField(allow_null=True, help_text="B ÷ A.")
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)
    percent = serializers.FloatField(allow_null=True)
    percent_low = serializers.FloatField(allow_null=True)
    percent_high = serializers.FloatField(allow_null=True)
    equivalence_percent = serializers.FloatField()
    confidence = serializers.FloatField()
    verdict = serializers.ChoiceField(choices=list(stats.VERDICTS))
    text = serializers.CharField()
    per_system = PerSystemSerializer(
        required=False, help_text="Spread of the per-system ratios (paired only)."
    )
    across = AcrossSerializer(
        help_text="Wilcoxon signed-rank, Hodges–Lehmann ratio and the "
        "probabilities of B better / equivalent / worse over the systems that "
        "measured both."
    )
    left_out = LeftOutPairSerializer()
    freshness = FreshnessSerializer(allow_null=True)


class FriedmanSerializer(serializers.Serializer):
    chi2 = serializers.FloatField(help_text="Demšar's chi²_F (no tie correction).")
    f = serializers.FloatField(help_text="Iman–Davenport F_F.")
    p = serializers.FloatField(help_text="p of F_F.")
    chi2_tie_corrected = serializers.FloatField(required=False)
    p_chi2 = serializers.FloatField(required=False)


class RankPairSerializer(serializers.Serializer):
    a = serializers.CharField()
    b = serializers.CharField()
    rank_difference = serializers.FloatField()
    p = serializers.FloatField(help_text="Nemenyi p.")
    different = serializers.BooleanField()


class RankProbabilitiesSerializer(ProbabilitiesSerializer):
    a = serializers.CharField()
    b = serializers.CharField()


class PopulationRankSerializer(serializers.Serializer):
    test_id = serializers.CharField()
    metric = serializers.CharField()
    unit = serializers.CharField()
    higher_is_better = serializers.BooleanField(allow_null=True)
    comparability_key = serializers.CharField(allow_null=True)
    facet = serializers.CharField()
    settings = serializers.ListField(
        child=serializers.CharField(), help_text="The values some system measured."
    )
    without_data = serializers.ListField(child=serializers.CharField())
    systems = serializers.IntegerField(help_text="Systems that measured all.")
    runs = serializers.IntegerField()
    minimum_systems = serializers.IntegerField()
    enough = serializers.BooleanField()
    systems_needed = serializers.IntegerField()
    average_ranks = serializers.DictField(
        child=serializers.FloatField(), allow_null=True, help_text="1 = best."
    )
    friedman = FriedmanSerializer(allow_null=True)
    critical_difference = serializers.FloatField(allow_null=True)
    alpha = serializers.FloatField()
    pairs = RankPairSerializer(many=True)
    groups = serializers.ListField(child=serializers.ListField())
    probabilities = RankProbabilitiesSerializer(many=True)
    equivalence_percent = serializers.FloatField()
    left_out = serializers.DictField(child=LeftOutSerializer())
    text = serializers.CharField()
    freshness = FreshnessSerializer(allow_null=True)


def _run_filters(params: QueryDict, extra: str | None = None) -> QueryDict:
    """The run filters of a request, plus those of ``extra`` (a query string)."""
    out = params.copy()
    for name in OWN_PARAMS:
        out.pop(name, None)
    if extra:
        for key, values in QueryDict(extra).lists():
            if key in OWN_PARAMS:
                raise exceptions.ValidationError(
                    {key: [f"{key} cannot be part of a setting"]}
                )
            out.setlist(key, values)
    return out


def _runs(params: QueryDict, pointer: str) -> list:
    """The run filters, checked (400 naming ``pointer`` when they do not
    validate: ``population.filter_runs``' message), as the arguments of a
    stored answer (``population.filter_items``).  Checked only: the answer's
    computation filters the runs."""
    errors, _cleaned = checked_filters(RunFilterSet, params)
    if errors:
        raise exceptions.ValidationError({pointer: [problems(errors)]})
    return population.filter_items(params)


class PopulationView(APIView):
    @extend_schema(
        summary="Across runs: distribution of a test's figure and of overheads",
        description="Over visible, not suspect runs narrowed by any run filter: "
        "the per-run figures' median, quartiles and bootstrap 95% interval of the "
        "median, with the number of runs and distinct systems; and the same for "
        "guest ÷ host of guest runs with a visible host baseline.",
        parameters=[PopulationQuerySerializer, *filter_parameters()],
        responses={200: PopulationSerializer, **error_responses(400)},
    )
    def get(self, request):
        q = validated(PopulationQuerySerializer, request.query_params)
        filters = _runs(_run_filters(request.query_params), "filters")
        answer, found = answers.distribution.with_freshness(
            filters, q["test_id"], q["metric"], q.get("comparability_key")
        )
        answer = {**answer, "freshness": answer_cache.freshness_of(found)}
        return Response(represent(PopulationSerializer, answer))


class PopulationCompareView(APIView):
    @extend_schema(
        summary="Across runs: setting A vs setting B",
        description="B against A over the community's runs, e.g. "
        "a=cache_mode%3Dnone&b=cache_mode%3Dwriteback&disk_type=sata-ssd: the "
        "effect B ÷ A as the median over systems measured under both of their "
        "ratio (bootstrap 95% interval), or with fewer than 3 such systems the "
        "ratio of the two sets' medians; the number of systems, and a verdict "
        "(faster, slower, equivalent, cannot tell).",
        parameters=[PopulationCompareQuerySerializer, *filter_parameters()],
        responses={200: PopulationCompareSerializer, **error_responses(400)},
    )
    def get(self, request):
        q = validated(PopulationCompareQuerySerializer, request.query_params)
        runs_a = _runs(_run_filters(request.query_params, q["a"]), "a")
        runs_b = _runs(_run_filters(request.query_params, q["b"]), "b")
        answer, found = answers.compare_sets.with_freshness(
            runs_a,
            runs_b,
            q["test_id"],
            q["metric"],
            q.get("comparability_key"),
            q["of"],
        )
        answer = {**answer, "freshness": answer_cache.freshness_of(found)}
        return Response(represent(PopulationCompareSerializer, answer))


class PopulationRankView(APIView):
    @extend_schema(
        summary="Across runs: k values of a setting ranked over systems",
        description="E.g. facet=cache_mode&values=none,writeback,unsafe&"
        "disk_type=sata-ssd: over the systems that measured every value with "
        "data, average ranks (1 = best), the Friedman test (Iman–Davenport F), "
        "Nemenyi's critical difference and post-hoc pairs, the groups a "
        "critical-difference diagram draws, and per pair the probabilities of "
        "B better, practically equivalent or worse (Bayesian signed-rank). "
        "Below 6 systems: how many more are needed instead of a ranking.",
        parameters=[PopulationRankQuerySerializer, *filter_parameters()],
        responses={200: PopulationRankSerializer, **error_responses(400)},
    )
    def get(self, request):
        q = validated(PopulationRankQuerySerializer, request.query_params)
        filters = _runs(_run_filters(request.query_params), "filters")
        answer, found = answers.rank_settings.with_freshness(
            filters,
            q["facet"],
            q["values"],
            q["test_id"],
            q["metric"],
            q.get("comparability_key"),
        )
        answer = {**answer, "freshness": answer_cache.freshness_of(found)}
        return Response(represent(PopulationRankSerializer, answer))


urlpatterns = [
    path("", PopulationView.as_view(), name="population"),
    path("compare/", PopulationCompareView.as_view(), name="population-compare"),
    path("rank/", PopulationRankView.as_view(), name="population-rank"),
]
