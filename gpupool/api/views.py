"""API views that belong to no domain app: issuing a token for a username and password, and
the answer to an address that names no resource."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import authenticate
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import AuthenticationFailed, NotFound
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle
from rest_framework.views import APIView

from gpupool.api.actions import do_issue_token
from gpupool.api.errors import ErrorSerializer
from gpupool.api.strict import StrictInput


class TokenRequestSerializer(StrictInput, serializers.Serializer[Any]):
    """A username and password to exchange for an API token."""

    username = serializers.CharField()
    password = serializers.CharField(style={"input_type": "password"}, trim_whitespace=False)
    rotate = serializers.BooleanField(
        default=False, help_text="Replace the existing token (the old one stops working)."
    )


class TokenSerializer(serializers.Serializer[Any]):
    """An API token: send it as ``Authorization: Bearer <token>``."""

    token = serializers.CharField()
    username = serializers.CharField()


class TokenThrottle(AnonRateThrottle):
    """Password guesses are slowed down per client address."""

    rate = "30/minute"


class TokenView(APIView):
    """``POST /api/v1/tokens/``: a user's API token for their username and password."""

    permission_classes = (AllowAny,)
    authentication_classes = ()
    throttle_classes = (TokenThrottle,)

    def get_authenticate_header(self, request: Request) -> str:
        """A wrong password is a 401 that asks for credentials again."""
        return "Bearer"

    @extend_schema(
        request=TokenRequestSerializer,
        responses={
            200: TokenSerializer,
            401: OpenApiResponse(ErrorSerializer, description="The username or password is wrong."),
        },
    )
    def post(self, request: Request) -> Response:
        """Check the password and answer the user's token (made on first use)."""
        form = TokenRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        user = authenticate(
            request._request,
            username=form.validated_data["username"],
            password=form.validated_data["password"],
        )
        if user is None or not user.is_active:
            raise AuthenticationFailed("The username or password is wrong.")
        token = do_issue_token(user, rotate=form.validated_data["rotate"])
        return Response(
            TokenSerializer({"token": token.key, "username": user.get_username()}).data,
            status=status.HTTP_200_OK,
        )


class NoSuchResource(APIView):
    """Any address under ``/api/v1/`` that names no resource: a 404 in the API's error shape
    (JSON, or as the client asked), not the site's HTML page, so a client's typo reads like
    every other refusal. Every method, every caller: there is nothing there to guard."""

    permission_classes = (AllowAny,)
    authentication_classes = ()
    schema = None  # not part of the API's description

    def _refuse(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        raise NotFound(
            f"No API resource at {request.path}; the index at /api/v1/ lists the resources."
        )

    get = post = put = patch = delete = head = options = _refuse
