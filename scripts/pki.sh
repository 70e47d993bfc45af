# Sourced by control-plane.sh and real-node.sh: client certificates signed by the test CA in
# $dir/pki, and kubeconfigs for the API server on 127.0.0.1:$api_port.
kubeconfig() {  # kubeconfig FILE USER CERT KEY
  cat > "$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: gpuheal-test
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority-data: $(base64 -w0 < "$dir/pki/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 < "$3")
    client-key-data: $(base64 -w0 < "$4")
contexts:
- name: gpuheal-test
  context:
    cluster: gpuheal-test
    user: $2
current-context: gpuheal-test
KC
}

client_cert() {  # client_cert NAME CN [O]
  local subj="/CN=$2"
  [[ -n ${3:-} ]] && subj="/O=$3/CN=$2"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$dir/pki/$1.key" -subj "$subj" -out "$dir/pki/$1.csr" 2>/dev/null
  openssl x509 -req -in "$dir/pki/$1.csr" -CA "$dir/pki/ca.crt" -CAkey "$dir/pki/ca.key" \
    -CAcreateserial -days 2 -out "$dir/pki/$1.crt" \
    -extfile <(printf "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature") 2>/dev/null
}
