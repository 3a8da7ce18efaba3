"""Writes bedrock.json: Bedrock requests signed by botocore's SigV4Auth, for the signer's tests.

Run with a Python that has botocore (not a test dependency), from this folder:
    python -m venv /tmp/boto && /tmp/boto/bin/pip install botocore
    /tmp/boto/bin/python make_bedrock_vectors.py
The other files here are vectors of the AWS SigV4 test suite, as botocore ships them in
tests/unit/auth/aws4_testsuite (Apache-2.0, see NOTICE; https://github.com/boto/botocore).
"""
import datetime
import json
from unittest import mock

import botocore
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

NOW = datetime.datetime(2026, 12, 2, 1, 2, 3)
CASES = [
    {"name": "invoke with a model id", "region": "us-east-1",
     "url": "https://bedrock-runtime.us-east-1.amazonaws.com/model/"
            "anthropic.claude-sonnet-4-5-20250929-v1:0/invoke-with-response-stream",
     "token": None},
    {"name": "invoke with an inference profile ARN and a session token", "region": "eu-west-3",
     "url": "https://bedrock-runtime.eu-west-3.amazonaws.com/model/"
            "arn:aws:bedrock:eu-west-3:123456789012:inference-profile%2Feu.anthropic."
            "claude-opus-4-1-20250805-v1:0/invoke-with-response-stream",
     "token": "FwoGZXIvYXdzEXAMPLETOKEN//////////wEaDEXAMPLE"},
]


def main():
    out = {"botocore": botocore.__version__, "date": NOW.isoformat() + "Z", "cases": []}
    for case in CASES:
        body = json.dumps({"anthropic_version": "bedrock-2023-05-31", "max_tokens": 64,
                           "messages": [{"role": "user", "content": "Hi ☃"}]}).encode()
        headers = {"Content-Type": "application/json",
                   "Accept": "application/vnd.amazon.eventstream"}
        request = AWSRequest(method="POST", url=case["url"], headers=dict(headers), data=body)
        creds = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                            case["token"])
        with mock.patch("botocore.auth.get_current_datetime", return_value=NOW):
            SigV4Auth(creds, "bedrock", case["region"]).add_auth(request)
        signed = {k: v for k, v in request.headers.items() if k.lower().startswith(
            ("x-amz", "authorization"))}
        out["cases"].append({**case, "body": body.decode(), "headers": headers,
                             "signed": signed})
    with open("bedrock.json", "w") as handle:
        json.dump(out, handle, indent=1, ensure_ascii=False)
        handle.write("\n")


if __name__ == "__main__":
    main()
