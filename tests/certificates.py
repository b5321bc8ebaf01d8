"""A self-signed certificate for 127.0.0.1 and localhost, for tests that serve HTTPS."""

from __future__ import annotations

import subprocess
from pathlib import Path

VALID_DAYS = 2


def self_signed(folder: Path) -> tuple[Path, Path]:
    """Write ``cert.pem`` (self-signed, for IP 127.0.0.1 and DNS localhost, its own CA) and
    ``key.pem`` (unencrypted) into ``folder``; returns their paths. Uses the ``cryptography``
    package when installed, else the ``openssl`` command."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    try:
        import cryptography  # noqa: F401
    except ImportError:
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", str(key), "-out", str(cert), "-days", str(VALID_DAYS), "-subj", "/CN=slaplan-test",
             "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
             "-addext", "basicConstraints=critical,CA:TRUE"],
            check=True, capture_output=True)
    else:
        _with_cryptography(cert, key)
    return cert, key


def _with_cryptography(cert_path: Path, key_path: Path) -> None:
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "slaplan-test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                                    x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
